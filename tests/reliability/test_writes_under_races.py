"""Writes that race another writer, a re-embed, a compaction or a full disk: a goal close reads
its closing note under the lock, every write checks the model, restore keeps the edges and
journal it needs, link ends are checked where edges are added, and a failed write says what
it stored.

Real LanceDB in temp dirs, the hash embedder. "Another process" is a second in-process Brain
on the same store whose write runs just before the call under test takes the write lock
(never while it is held: two stores' locks in one thread would deadlock).
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from lancedb.table import LanceTable

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput, StorageError
from octobrain.memory import conflicts, export, import_check, transfer
from octobrain.memory.brain import Brain
from octobrain.models import Memory, RelationshipType
from octobrain.store import ModelMismatch, NotFound, upkeep
from octobrain.times import utcnow
from tests.conflicts_support import conflict_edges, timeout
from tests.consolidation_support import SCOPE, MakeBrain, add_at, all_edges, raw_rows, twins
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared
from tests.export_lines import ended

FULL = "LanceError(IO): No space left on device (os error 28), /data/relationships.lance"


def before_lock(monkeypatch: pytest.MonkeyPatch, brain: Brain, write: Callable[[], Any]) -> None:
    """Run `write` (another Brain's) once, just before `brain` next takes its write lock."""
    real, pending = brain.store.write_lock, [write]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        while pending:
            pending.pop()()
        return real(*args, **kwargs)

    monkeypatch.setattr(brain.store, "write_lock", wrapped)


def goal_with_closing_note(brain: Brain) -> tuple[str, str]:
    """A goal, the note that `closes` it, then a finding left to consolidate under the note."""
    goal, _ = brain.memorize("Ship rate limiting", "Goal: rate limit the API.", memory_type="goal")
    closes = [{"target_id": goal.id, "relationship_type": "closes"}]
    note, _ = brain.memorize("Rate limiting shipped", "Token bucket per key.", related_to=closes)
    achieves = [{"target_id": goal.id, "relationship_type": "achieves"}]
    brain.memorize("Limits file", "Limits live in config/limits.toml.", related_to=achieves)
    return goal.id, note.id


def auth_note(brain: Brain) -> tuple[Memory, list[dict[str, str]]]:
    """A memory the tests link to, and the `related_to` that links to it."""
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    return a, [{"target_id": a.id}]


def full_disk(monkeypatch: pytest.MonkeyPatch, table: str, method: str, after: int = 0) -> None:
    """`LanceTable.<method>` on `table` fails as on a full disk, from call `after + 1` on."""
    real, calls = getattr(LanceTable, method), [0]

    def failing(self: LanceTable, *args: Any, **kwargs: Any) -> Any:
        if self.name == table:
            calls[0] += 1
            if calls[0] > after:
                raise RuntimeError(FULL)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LanceTable, method, failing)


# ---- goal close -----------------------------------------------------------------------------


def test_a_goal_close_keeps_an_edit_of_its_closing_note_made_while_it_waited(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the closing note was read before the lock and written back whole, undoing an
    # update made meanwhile. Now it is read under the lock.
    brain, other = make_brain(), make_brain()
    goal, note = goal_with_closing_note(brain)
    before_lock(monkeypatch, brain, lambda: other.update(note, content="Edited: 200 per minute."))
    assert brain.consolidate_goal(goal).parent.id == note
    assert raw_rows(make_brain())[note]["content"] == "Edited: 200 per minute."


def test_a_goal_close_does_not_bring_back_a_closing_note_forgotten_while_it_waited(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the forgotten closing note was written back as the parent. Now it stays gone.
    brain, other = make_brain(), make_brain()
    goal, note = goal_with_closing_note(brain)
    before_lock(monkeypatch, brain, lambda: other.forget([note], confirm=True))
    assert brain.consolidate_goal(goal).parent.id != note
    assert note not in raw_rows(make_brain())


def test_link_ends_of_a_goal_close_are_checked_under_the_lock(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a closing memorize stored an edge to a memory forgotten while it embedded.
    # Now it is refused naming `related_to`, and nothing is stored.
    brain, other = make_brain(), make_brain()
    goal, _ = brain.memorize("Ship rate limiting", "Goal: rate limit the API.", memory_type="goal")
    achieves = [{"target_id": goal.id, "relationship_type": "achieves"}]
    finding, _ = brain.memorize("Limits file", "Limits live in limits.toml.", related_to=achieves)
    x, _ = brain.memorize("Token bucket", "A token bucket per API key.")
    embed = brain.embedder.embed_documents

    def forget_x_first(texts: Any) -> Any:
        other.forget([x.id], confirm=True)
        return embed(texts)

    monkeypatch.setattr(brain.embedder, "embed_documents", forget_x_first)
    links = [
        {"target_id": goal.id, "relationship_type": "closes"},
        {"target_id": x.id, "relationship_type": "related_to"},
    ]
    with pytest.raises(NotFound, match="^related_to: "):
        brain.memorize("Rate limiting shipped", "It is live.", related_to=links)
    rows = raw_rows(make_brain())
    assert set(rows) == {goal.id, finding.id} and rows[finding.id]["state"] == "working"
    assert not [e for e in all_edges(make_brain()).values() if x.id in (e.source_id, e.target_id)]


def test_linking_a_pair_again_or_at_once_keeps_one_edge(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `memory relate A B` run again (the retry after "its effect is unknown"), or by
    # another session at the same moment, stored the link a second time: `graph` listed it
    # twice. Now the link is looked for under the write lock; the edge there is the answer.
    brain, other = make_brain(), make_brain()
    a, _ = brain.memorize("Deploy freeze", "Deploys freeze on Fridays at noon.")
    b, _ = brain.memorize("Release train", "Releases are cut on Tuesdays from main.")
    beside: list[Any] = []
    before_lock(monkeypatch, brain, lambda: beside.append(other.relate(a.id, b.id, "depends_on")))
    first = brain.relate(a.id, b.id, "depends_on")
    again = brain.relate(a.id, b.id[:8], "depends_on", strength=0.3)
    assert first == again == beside[0]
    edges = list(all_edges(make_brain()).values())
    assert edges == [first] and first.strength == 0.8
    assert brain.graph(a.id, 1)[1] == [first]
    # Another type is another link.
    brain.relate(a.id, b.id, "related_to")
    assert len(all_edges(make_brain())) == 2


def test_an_import_of_a_link_the_store_holds_under_another_id_adds_no_second_edge(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: a teammate's export holding A -depends_on-> B, imported while another session
    # linked the pair here (or a file listing that link twice, under two ids), stored the link
    # a second (third) time: edges were told apart by id alone. Now by their link too.
    source = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "x")
    a, _ = source.memorize("Deploy freeze", "Deploys freeze on Fridays at noon.")
    b, _ = source.memorize("Release train", "Releases are cut on Tuesdays from main.")
    plain = io.StringIO()
    export.export_jsonl(source, plain)
    source.relate(a.id, b.id, "depends_on")
    linked = io.StringIO()
    export.export_jsonl(source, linked)
    lines = linked.getvalue().splitlines()
    edge = json.loads(next(line for line in lines if '"relationship"' in line))
    lines = ended([*lines, json.dumps({**edge, "id": str(uuid.uuid4())})])  # again, another id
    brain, other = make_brain(), make_brain()
    transfer.import_jsonl(brain, plain.getvalue().splitlines())
    beside: list[Any] = []
    before_lock(monkeypatch, brain, lambda: beside.append(other.relate(a.id, b.id, "depends_on")))
    report = transfer.import_jsonl(brain, lines)
    assert (report.relationships, report.relationships_not_stored) == (0, 0)
    assert list(all_edges(make_brain()).values()) == beside
    # A link the store does not hold is imported as before.
    source.relate(b.id, a.id, "related_to")
    again = io.StringIO()
    export.export_jsonl(source, again)
    assert transfer.import_jsonl(brain, again.getvalue().splitlines()).relationships == 1
    assert len(all_edges(make_brain())) == 2


# ---- the model ------------------------------------------------------------------------------


def test_a_long_lived_brain_cannot_write_after_another_reembeds_the_store(
    make_brain: MakeBrain,
) -> None:
    # Before: the model was checked only when the store opened, so a vector of the old model
    # was written into a re-embedded store. Now every write checks it.
    brain = make_brain()
    brain.memorize("Primary database", "Postgres 16 is the primary database.")
    assert transfer.reembed(make_brain(model="hash:32")) == 1
    with pytest.raises(ModelMismatch, match="hash:32"):
        brain.memorize("Frontend stack", "The web client is written in TypeScript.")
    assert [r["title"] for r in raw_rows(make_brain(model="hash:32")).values()] == [
        "Primary database"
    ]


def test_a_restore_across_a_reembed_is_refused_before_anything_changes(
    make_brain: MakeBrain,
) -> None:
    # Before: a hash:32 brain restored a hash:64 version, leaving a store its model cannot
    # read. Now it is refused naming `version` and the model; the right model restores it.
    first = make_brain()
    first.memorize("Primary database", "Postgres 16 is the primary database.")
    first.memorize("Frontend stack", "The web client is written in TypeScript.")
    version = first.history(1)[0].version
    moved = make_brain(model="hash:32")
    transfer.reembed(moved)
    latest = moved.history(1)[0]
    with pytest.raises(InvalidInput, match=rf"^version: version {version} .*'hash:64'"):
        moved.restore(version, confirm=True)
    assert make_brain(model="hash:32").history(1)[0] == latest
    assert make_brain().restore(version, confirm=True).rows == 2
    assert len(raw_rows(make_brain())) == 2


# ---- restore --------------------------------------------------------------------------------


def test_a_restore_across_a_clock_step_is_refused_before_anything_changes(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Companion tables go back by version times: with the clock stepped back an hour after
    # the version restored, the memory came back without its edge (3 of 3 with faketime).
    brain = make_brain()
    _, link = auth_note(brain)
    brain.memorize("Refresh rotation", "Refresh tokens rotate.", related_to=link)
    target = brain.history(1)[0].version
    brain.memorize("Key storage", "Signing keys live in the vault.")  # an hour "earlier"
    real = LanceTable.list_versions

    def stepped(self: LanceTable) -> Any:
        versions = real(self)
        if self.name == "memories":
            newest = max(versions, key=lambda v: int(v["version"]))
            newest["timestamp"] -= timedelta(hours=1)
        return versions

    monkeypatch.setattr(LanceTable, "list_versions", stepped)
    before = brain.history(1)[0].version
    with pytest.raises(InvalidInput, match=r"^version: .*the clock went back between memories"):
        brain.restore(target, confirm=True)
    assert brain.history(1)[0].version == before


def test_restore_brings_edges_back_after_compaction_cleaned_old_versions(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: compaction dropped the relationships version a kept memories version needed, so
    # a restore brought the memory back without its edge. Now that version is kept.
    brain = make_brain()
    a, link = auth_note(brain)
    b, _ = brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    time.sleep(3)  # the edge's version is now older than what compaction keeps
    monkeypatch.setattr(upkeep, "KEEP_VERSIONS_FOR", timedelta(seconds=2))
    brain.memorize("Key storage", "Signing keys live in the vault.")
    version = brain.history(1)[0].version
    brain.forget([a.id], confirm=True)
    brain.store.compact()
    brain.restore(version, confirm=True)
    fresh = make_brain()
    assert a.id in raw_rows(fresh)
    assert [(e.source_id, e.target_id) for e in fresh.store.relationships_of([a.id])] == [
        (b.id, a.id)
    ]


def test_restore_between_an_unconsolidates_two_commits_leaves_it_in_force_and_undoable(
    make_brain: MakeBrain,
) -> None:
    # Before: the journal came back `reverting` over consolidated rows, so the next repair
    # finished the undo and unconsolidate said "no consolidation in force". Now it is `done`.
    brain = make_brain()
    ids = twins(brain)
    parent = brain.sleep_consolidate().consolidations[0].parent.id
    version = brain.history(1)[0].version
    brain.unconsolidate(parent)
    brain.restore(version, confirm=True)
    fresh = make_brain()
    assert {raw_rows(fresh)[i]["state"] for i in ids} == {"consolidated"}
    assert sorted(fresh.unconsolidate(parent).restored) == sorted(ids)
    assert {raw_rows(fresh)[i]["state"] for i in ids} == {"working"}


def test_unconsolidate_keeps_an_importance_set_on_a_member_since(make_brain: MakeBrain) -> None:
    # Before: every member got its pre-consolidation importance back, undoing an acknowledged
    # `update`. Now an edited importance stays; an untouched member's goes back.
    brain = make_brain()
    edited, untouched, *_ = ids = twins(brain)
    before = raw_rows(brain)
    parent = brain.sleep_consolidate().consolidations[0].parent.id
    brain.update(edited, importance=0.95)
    assert sorted(brain.unconsolidate(parent).restored) == sorted(ids)
    rows = raw_rows(make_brain())
    assert rows[edited]["importance"] == pytest.approx(0.95)
    assert rows[untouched]["importance"] == before[untouched]["importance"]


# ---- sleep conflicts ------------------------------------------------------------------------


def two_values(brain: Brain) -> tuple[str, str]:
    """An old and a newer statement of one value: the newer prevails. Returns (new, old)."""
    now = utcnow()
    old = add_at(brain, "Timeout", timeout(30), now - timedelta(days=30))
    new = add_at(brain, "Timeout", timeout(45), now - timedelta(days=1))
    return new.id, old.id


@pytest.mark.parametrize("meanwhile", ["forgotten", "merged"])
def test_a_conflict_with_a_statement_gone_meanwhile_is_not_recorded(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    # Before: the pass wrote a `conflicts` edge to a memory forgotten after it read the store
    # (an edge to nothing), or merged into a parent by a pass beside it (an edge to a member,
    # which no search shows first). Now the ends are checked under the lock; a merged one
    # waits for the next pass, which weighs the parent.
    brain, other = make_brain(), make_brain()
    _, old = two_values(brain)
    resolve = conflicts.resolve

    def loser_gone_first(*args: Any, **kwargs: Any) -> Any:
        if meanwhile == "forgotten":
            other.forget([old], confirm=True)
        else:
            other.store.set_columns(f"id = '{old}'", {"state": "consolidated"})
        return resolve(*args, **kwargs)

    monkeypatch.setattr(conflicts, "resolve", loser_gone_first)
    report = brain.sleep_consolidate(threshold=0.7)
    assert conflict_edges(make_brain()) == set() and report.conflicts == []


def test_two_passes_side_by_side_record_a_conflict_once(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a pass running beside this one linked the pair after this one read the store, and
    # both wrote the edge. Now the links are read again under the lock.
    brain, other = make_brain(), make_brain()
    new, old = two_values(brain)
    resolve, beside = conflicts.resolve, [other.sleep_consolidate]

    def pass_beside(*args: Any, **kwargs: Any) -> Any:
        while beside:
            assert len(beside.pop()(threshold=0.7).conflicts) == 1
        return resolve(*args, **kwargs)

    monkeypatch.setattr(conflicts, "resolve", pass_beside)
    report = brain.sleep_consolidate(threshold=0.7)
    kinds = [e.relationship_type for e in all_edges(make_brain()).values()]
    assert kinds == [RelationshipType.CONFLICTS] and conflict_edges(make_brain()) == {(new, old)}
    assert report.conflicts == []  # the pass beside it recorded it


# ---- a full disk ----------------------------------------------------------------------------


def test_a_full_disk_while_memorize_links_stores_nothing_or_says_what_it_stored(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the memory was committed, its edges failed, and the error said "nothing was
    # changed". Now the memory is taken back; when that fails too, the error names it.
    brain = make_brain()
    a, link = auth_note(brain)
    full_disk(monkeypatch, "relationships", "add")
    with pytest.raises(StorageError, match=r"No space left on device .*; nothing was changed"):
        brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    assert set(raw_rows(make_brain())) == {a.id}

    full_disk(monkeypatch, "memories", "delete")
    with pytest.raises(StorageError, match="stored without their links") as failed:
        brain.memorize("Key storage", "Signing keys live in the vault.", related_to=link)
    (stored,) = set(raw_rows(make_brain())) - {a.id}
    assert stored in str(failed.value) and "nothing was changed" not in str(failed.value)


def test_a_full_disk_while_forget_removes_edges_says_the_memory_is_gone(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the memory's delete committed, its edges' failed, and the error said "nothing
    # was changed". Now it says the memory was deleted but not its edges, and how to drop them.
    brain = make_brain()
    a, link = auth_note(brain)
    brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    full_disk(monkeypatch, "relationships", "delete")
    with pytest.raises(StorageError, match="1 memories were deleted but not their edges") as failed:
        brain.forget([a.id], confirm=True)
    assert "nothing was changed" not in str(failed.value)
    assert "doctor --drop-dangling-edges" in str(failed.value)
    assert a.id not in raw_rows(make_brain())


def test_a_full_disk_during_an_import_says_how_much_was_imported(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Before: a failure in the second batch said "nothing was changed" over the first batch
    # it had stored. Now it says how many were imported before it.
    monkeypatch.setattr(import_check, "BATCH", 2)
    brain = make_brain()
    for i in range(5):
        brain.memorize(f"Decision {i}", f"Small fact number {i} worth keeping.")
    out = io.StringIO()
    export.export_jsonl(brain, out, embeddings=True)
    other = Brain(SCOPE, config=brain.config, embedder=brain.embedder, uri=tmp_path / "other")
    other.store.open()
    full_disk(monkeypatch, "memories", "add", after=1)
    with pytest.raises(StorageError, match="2 of 5 memories.* were imported before it"):
        transfer.import_jsonl(other, out.getvalue().splitlines())
    assert len(raw_rows(other)) == 2


def test_a_memory_closes_one_goal_when_two_closes_race(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each `relate NOTE GOAL -t closes` looked for the note's other goal before the
    # write lock, so two run at once (4 CLI processes: 2 or 3 of 4 stored) left one note
    # closing two goals. Now the look is under the lock: the second is refused.
    brain, other = make_brain(), make_brain()
    g1, _ = brain.memorize("Ship rate limiting", "Goal: rate limit the API.", memory_type="goal")
    g2, _ = brain.memorize("Ship audit log", "Goal: log every admin action.", memory_type="goal")
    note, _ = brain.memorize("Both shipped", "Rate limits and the audit log are live.")
    before_lock(monkeypatch, brain, lambda: other.relate(note.id, g2.id, "closes"))
    with pytest.raises(InvalidInput, match=f"^target_id: {note.id} already closes goal {g2.id}"):
        brain.relate(note.id, g1.id, "closes")
    edges = all_edges(make_brain()).values()
    closes = [e for e in edges if e.relationship_type is RelationshipType.CLOSES]
    assert [(e.source_id, e.target_id) for e in closes] == [(note.id, g2.id)]
