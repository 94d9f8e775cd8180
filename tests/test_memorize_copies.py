"""A memorize of a memory already stored (a retry, the same fact learned again): no second copy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from octobrain.cli.main import main
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.render import format_stored
from octobrain.models import RelationshipType, Source, State
from tests.server_support import PROJECT_A, call, hash_pool, memory_id, run, server_for

SCOPE = "github.com/acme/api"
TITLE = "Rate limiting decision"
TEXT = "API clients are throttled with a token bucket per key: 100 requests/min, burst 20."


def _brain(uri: Path, scope: str = SCOPE, session_id: str = "") -> Brain:
    return Brain(
        scope, config=Config(), embedder=get_embedder("hash:64"), uri=uri, session_id=session_id
    )


def _rows(brain: Brain) -> list[dict[str, Any]]:
    return brain.store.scan("true", columns=["id", "scope", "title", "content", "state"])


def test_the_same_memory_sent_again_is_answered_with_the_one_stored(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "db")
    first, _ = stored = brain.memorize(TITLE, TEXT, memory_type="decision")
    assert stored.already is None
    again = brain.memorize(TITLE, TEXT, memory_type="decision")
    assert again[0].id == first.id and again.already is not None
    assert again.already.stored_at == first.created_at and again.already.added == ()
    assert [r["id"] for r in _rows(brain)] == [first.id]
    # Found once, not twice; and the call counted as a use of it.
    hits = brain.remember("token bucket throttling", min_relevance=0.0).hits
    assert [h.memory.id for h in hits] == [first.id]
    brain.flush()
    assert brain.get(first.id).access_count >= 1


def test_a_copy_takes_what_the_call_adds_and_loses_nothing_it_had(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "db")
    first, _ = brain.memorize(
        TITLE, TEXT, tags=["api"], importance=0.7, source="agent_inferred", related_files=["a.py"]
    )
    again = brain.memorize(
        TITLE, TEXT, tags=["limits", "api"], importance=0.4, source="user_confirmed"
    )
    assert again.already is not None
    assert again.already.added == ("tags limits", "source agent_inferred → user_confirmed")
    held = _brain(tmp_path / "db").get(first.id)  # as stored, read by another Brain
    assert held.tags == ["api", "limits"] and held.related_files == ["a.py"]
    assert held.importance == pytest.approx(0.7), "a lower importance given never lowers it"
    assert held.source is Source.USER_CONFIRMED
    # Given without importance or source, the defaults take nothing away either.
    brain.memorize(TITLE, TEXT)
    assert brain.get(first.id).source is Source.USER_CONFIRMED
    raised = brain.memorize(TITLE, TEXT, importance=0.9, related_files=["b.py"])
    assert raised.already is not None
    assert raised.already.added == ("related files b.py", "importance 0.70 → 0.90")
    assert brain.get(first.id).related_files == ["a.py", "b.py"]
    # Its vector is that of its text as it is now: found by a tag it gained.
    hits = brain.remember("limits", min_relevance=0.0, tags=["limits"]).hits
    assert [h.memory.id for h in hits] == [first.id]
    assert len(_rows(brain)) == 1
    # Past what a memory holds, what has no room is said, not dropped without a word.
    full = brain.memorize(TITLE, TEXT, tags=[f"t{i}" for i in range(10)])
    assert full.already is not None and full.already.left_out == (
        "tags t8, t9 (a memory holds at most 10)",
    )
    assert "; not added: tags t8, t9 (a memory holds at most 10)" in format_stored(
        full[0], full[1], 0, full.already
    )


def test_what_differs_in_type_text_or_scope_is_stored_apart(tmp_path: Path) -> None:
    uri = tmp_path / "db"
    brain = _brain(uri)
    first, _ = brain.memorize(TITLE, TEXT, memory_type="decision")
    others = [
        brain.memorize(TITLE, TEXT, memory_type="learning"),
        brain.memorize(TITLE, TEXT[:-1], memory_type="decision"),
        brain.memorize(TITLE + "s", TEXT, memory_type="decision"),
        brain.memorize(TITLE, TEXT, memory_type="decision", global_=True),
        _brain(uri, "github.com/acme/web").memorize(TITLE, TEXT, memory_type="decision"),
    ]
    assert all(s.already is None for s in others)
    assert len({first.id, *(s[0].id for s in others)}) == 6 == len(_rows(brain))


@pytest.mark.parametrize("state", [State.CONSOLIDATED, State.ARCHIVED])
def test_a_copy_no_longer_working_leaves_the_new_memory_stored(
    tmp_path: Path, state: State
) -> None:
    brain = _brain(tmp_path / "db")
    old, _ = brain.memorize(TITLE, TEXT)
    brain.store.set_columns(f"id = '{old.id}'", {"state": state.value})
    new = brain.memorize(TITLE, TEXT)
    assert new.already is None and new[0].id != old.id
    assert brain.get(old.id).state is state


def test_links_of_a_copy_are_added_once(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "db")
    target, _ = brain.memorize("Gateway", "The API gateway enforces the limits per key.")
    other, _ = brain.memorize("Billing", "Plans set the per-key limits of the gateway.")
    link = [{"target_id": target.id, "relationship_type": "depends_on"}]
    first, edges = brain.memorize(TITLE, TEXT, related_to=link)
    assert len(edges) == 1
    again = brain.memorize(TITLE, TEXT, related_to=link)
    assert again[1] == [] and again.already is not None and again.already.added == ()
    more = brain.memorize(TITLE, TEXT, related_to=[*link, {"target_id": other.id}])
    assert [(e.source_id, e.target_id) for e in more[1]] == [(first.id, other.id)]
    assert more.already is not None and more.already.added == ("links 1",)
    kinds = sorted(e.relationship_type.value for e in brain.store.relationships_of([first.id]))
    assert kinds == [RelationshipType.DEPENDS_ON.value, RelationshipType.RELATED_TO.value]


def test_a_retry_in_the_same_session_neither_copies_nor_links_to_itself(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "db", session_id="session-1")
    first, _ = brain.memorize(TITLE, TEXT)
    again = brain.memorize(TITLE, TEXT)
    assert again[0].id == first.id and again[1] == []
    assert brain.get(first.id).tags == first.tags  # one session tag, not two
    assert brain.store.relationships_of([first.id]) == []
    # From a later session, the same fact is the same memory; it stays in its first session.
    later = _brain(tmp_path / "db", session_id="session-2").memorize(TITLE, TEXT)
    assert later[0].id == first.id and brain.get(first.id).tags == first.tags


def test_a_copy_asked_to_link_to_itself_says_it_does_not(tmp_path: Path) -> None:
    # Before: the link was skipped without a word ('nothing added'), where relate refuses it.
    brain = _brain(tmp_path / "db")
    first, _ = brain.memorize(TITLE, TEXT)
    again = brain.memorize(TITLE, TEXT, related_to=[{"target_id": first.id[:8]}])
    assert again[1] == [] and again.already is not None
    assert again.already.left_out == (
        f"the related_to link to {first.id} (a memory does not link to itself)",
    )
    text = format_stored(again[0], again[1], 0, again.already)
    assert f"not added: the related_to link to {first.id} (a memory does not" in text
    assert brain.store.relationships_of([first.id]) == []


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    uri, start = Path(sys.argv[1]), Path(sys.argv[2])
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    brain.store.open()
    while not start.exists():
        pass
    for i in range(15):
        memory, _ = brain.memorize(f"Shared fact {i}", f"Every writer sends fact number {i}.")
        print(i, memory.id, flush=True)
    """
)


def test_processes_sending_the_same_memories_at_once_store_each_once(tmp_path: Path) -> None:
    uri, start = tmp_path / "db", tmp_path / "start"
    _brain(uri).store.open()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(uri), str(start)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    start.touch()
    answers: dict[int, set[str]] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        for number, memory in (line.split() for line in out.strip().split("\n")):
            answers.setdefault(int(number), set()).add(memory)
    rows = _rows(_brain(uri))
    assert len(rows) == 15
    # Each fact is one memory, and every writer was answered with it.
    assert {i: {r["id"] for r in rows if r["title"] == f"Shared fact {i}"} for i in answers} == (
        answers
    )


def test_the_cli_says_already_stored_and_what_it_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")

    def memorize(*extra: str) -> Any:
        args = ["memory", "--scope", SCOPE, "memorize", "-t", TITLE, "-c", TEXT, *extra]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        return result.output

    first = json.loads(memorize("--format", "json"))
    assert first["already_stored"] is None
    text = memorize("--tags", "limits")
    assert text.startswith(f"Memory already stored: {first['id']} (this scope holds a memory")
    assert "added to it: tags limits" in text
    again = json.loads(memorize("--tags", "limits", "--format", "json"))
    assert again["id"] == first["id"] and again["already_stored"]["added"] == []
    assert again["already_stored"]["stored_at"].endswith("Z")


def test_the_mcp_tool_answers_a_retry_with_the_memory_stored(tmp_path: Path) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server, mode="legacy") as client:
            args = {"title": TITLE, "content": TEXT, "memory_type": "decision"}
            error, reply = await call(client, "memorize", **args)
            assert not error and reply.startswith("Memory stored: ")
            first = memory_id(reply)
            error, reply = await call(client, "memorize", **args, importance=0.9)
            assert not error
            assert reply.startswith(f"Memory already stored: {first} ")
            assert "added to it: importance 0.50 → 0.90" in reply
            error, reply = await call(client, "remember", query="token bucket")
            assert not error and reply.count(first) == 1

    run(body)


def test_a_copy_is_found_in_an_indexed_table_and_in_rows_written_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 5)  # the title index from 5 rows
    brain = _brain(tmp_path / "db")
    kept = [brain.memorize(f"Fact {i}", f"Durable fact number {i}.")[0] for i in range(8)]
    brain.store.compact()
    assert "title" in {ix.columns[0] for ix in brain.store.memories.list_indices()}
    assert brain.memorize("Fact 3", "Durable fact number 3.")[0].id == kept[3].id
    later, _ = brain.memorize("Fact 9", "Durable fact number 9.")  # not indexed yet
    assert brain.memorize("Fact 9", "Durable fact number 9.")[0].id == later.id
    assert brain.memorize("Fact 3", "Durable fact number 3!").already is None


@pytest.mark.parametrize(
    "text",
    [
        "It's the user's rule: never 'force push' to main.",
        "Paths like C:\\temp\\new and \\n stay as typed; 100% of _cases_ match.",
        "First line of the fact.\nSecond line, after a line break.\n\nThird.",
        "Deploys 🚀 are frozen during the שבוע של השחרור (release week).",
        "a' OR '1'='1'; DROP TABLE memories; -- an injection attempt",
    ],
)
def test_any_text_sent_again_is_found_as_itself(tmp_path: Path, text: str) -> None:
    brain = _brain(tmp_path / "db")
    first, _ = brain.memorize("Odd text's title", text)
    assert brain.memorize("Odd text's title", text)[0].id == first.id
    assert brain.memorize("Odd text's title", text + " more").already is None
    assert len(_rows(brain)) == 2


def test_copies_stored_before_are_shown_once_and_the_next_memory_takes_their_place(
    tmp_path: Path,
) -> None:
    from octobrain.memory.render import recall_to_dict
    from octobrain.models import Memory

    brain = _brain(tmp_path / "db")
    # Written as a store written before memorize looked for copies holds them (or an import).
    twins = [Memory(TITLE, TEXT, scope=SCOPE) for _ in range(3)]
    other = Memory(
        "Burst size", "The token bucket of each API key allows a burst of 20.", scope=SCOPE
    )
    rows = [*twins, other]
    brain.store.add(rows, brain.embedder.embed_documents([m.embedded_text() for m in rows]))
    recall = brain.remember("token bucket per key", limit=2, min_relevance=0.0)
    shown = [h.memory.id for h in recall.hits]
    assert len(shown) == 2 and other.id in shown
    [first] = [h for h in recall.hits if h.memory.id != other.id]
    assert sorted([first.memory.id, *first.copies]) == sorted(m.id for m in twins)
    assert f"the same text is stored again as {', '.join(first.copies)}" in first.why
    assert recall_to_dict(recall)["results"][shown.index(first.memory.id)]["copies"] == first.copies


def test_the_same_words_said_twice_in_a_conversation_stay_two_turns(tmp_path: Path) -> None:
    from octobrain.memory.conversation import parse_chat

    brain = _brain(tmp_path / "db")
    said = "Sounds good, ship the rate limiter on Friday."
    turns = [
        {"speaker": "Ana", "text": said, "session": "monday"},
        {"speaker": "Bo", "text": "Are we sure the dashboards are ready?", "session": "monday"},
        {"speaker": "Ana", "text": said, "session": "monday"},
    ]
    brain.ingest([parse_chat(turns, key="standup")])
    hits = brain.remember("ship the rate limiter", min_relevance=0.0).hits
    assert sum(h.memory.content == said for h in hits) == 2
    assert all(h.copies == [] for h in hits)


def test_many_copies_are_counted_past_the_first_three(tmp_path: Path) -> None:
    from octobrain.models import Memory

    brain = _brain(tmp_path / "db")
    twins = [Memory(TITLE, TEXT, scope=SCOPE) for _ in range(6)]
    brain.store.add(twins, brain.embedder.embed_documents([m.embedded_text() for m in twins]))
    [hit] = brain.remember("token bucket per key", min_relevance=0.0).hits
    assert len(hit.copies) == 5
    assert hit.why.endswith(f"stored again as {', '.join(hit.copies[:3])} and 2 more")


def test_a_memory_cannot_supersede_one_that_supersedes_it(tmp_path: Path) -> None:
    # Before: the link was stored, and both memories ranked as replaced (x0.1 each): a
    # retry of the older one naming the newer as superseded made that cycle without a word.
    from octobrain.errors import InvalidInput

    brain = _brain(tmp_path / "db")
    old, _ = brain.memorize("Cache TTL", "The cache TTL is 60 seconds.", memory_type="decision")
    new, _ = brain.memorize(
        "Cache TTL raised",
        "The cache TTL is 300 seconds now.",
        memory_type="decision",
        related_to=[{"target_id": old.id, "relationship_type": "supersedes"}],
    )
    newest, _ = brain.memorize("Cache TTL final", "The cache TTL is 600 seconds.")
    brain.relate(newest.id, new.id, "supersedes")
    for source in (old.id, new.id):  # directly, and through the memory it supersedes
        with pytest.raises(InvalidInput, match=r"^target_id: .* already supersedes .*"):
            brain.relate(source, newest.id, "supersedes")
    brain.relate(old.id, newest.id, "related_to")  # another type is no cycle
    with pytest.raises(InvalidInput, match=r"^related_to\[0\]: .* already supersedes"):
        brain.memorize(
            "Cache TTL",
            "The cache TTL is 60 seconds.",
            memory_type="decision",
            tags=["cache"],
            related_to=[{"target_id": new.id, "relationship_type": "supersedes"}],
        )
    assert brain.get(old.id).tags == []  # refused before the copy took what the call added
    hits = brain.remember("cache TTL seconds", min_relevance=0.0, limit=3).hits
    assert hits[0].memory.id == newest.id


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("Deploy plan", "Deploy\u200b plan"),
        ("Deploy plan", "\ufeffDeploy plan\u2060"),
        ("Caf\u00e9 deploy plan", "Cafe\u0301 deploy plan"),
        ("Cafe\u0301 deploy plan", "Caf\u00e9 deploy plan"),
    ],
)
def test_a_title_spelled_with_invisible_characters_is_the_same_memory(
    tmp_path: Path, first: str, again: str
) -> None:
    # Before: a zero-width space, a BOM or a decomposed accent made the same title another one,
    # and a retry stored a second copy that printed exactly as the first.
    brain = _brain(tmp_path / "db")
    held, _ = brain.memorize(first, TEXT)
    copy = brain.memorize(again, TEXT.replace("token", "to\u00adken"))
    assert copy[0].id == held.id and copy.already is not None
    assert [r["title"] for r in _rows(brain)] == [first]  # kept as first spelled
