"""`memory import` refuses what an export never holds: links octobrain keeps for itself, fields
it does not know, rows without a scope or of a scope the header does not name, times out of
order, a second header, counts that are not the file's; and what an export does hold imports
back to the same export."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory import consolidation
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from octobrain.models import RelationshipType, State
from tests.consolidation_support import twins
from tests.export_lines import ended

MakeBrain = Callable[..., Brain]
SCOPE = "github.com/acme/api"


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(name: str = "db", scope: str = SCOPE, session: str = "") -> Brain:
        return Brain(
            scope,
            config=Config(),
            embedder=get_embedder("hash:64"),
            uri=tmp_path / name,
            session_id=session,
        )

    return make


def _lines(brain: Brain, *, embeddings: bool = False) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_jsonl(brain, out, embeddings=embeddings)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _dumped(lines: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(o) for o in lines]


def _closed_goal(brain: Brain) -> tuple[str, str, str]:
    """A goal, a finding that achieves it and a note that closes it (a consolidation record):
    the three ids."""
    goal, _ = brain.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    finding, _ = brain.memorize(
        "Rate limiting decision",
        "API rate limiting uses a token bucket per key: 100 requests per minute, burst 20.",
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    closing, _ = brain.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert brain.get(finding.id).state is State.CONSOLIDATED
    return goal.id, finding.id, closing.id


def test_a_consolidated_from_link_is_imported_only_with_the_record_that_names_it(
    make_brain: MakeBrain,
) -> None:
    # A depends_on row retyped consolidated_from was imported: the unrelated memory ranked
    # first "via consolidated member", `unrelate` refused the type, `unconsolidate` found no
    # consolidation and `doctor` said ok.
    brain = make_brain("src")
    _closed_goal(brain)
    queue, _ = brain.memorize("Queue", "Billing events go through SQS FIFO.")
    brain.memorize(
        "Postgres primary",
        "Postgres 16 is the primary database; Redis only caches sessions.",
        related_to=[{"target_id": queue.id, "relationship_type": "depends_on"}],
    )
    lines = _lines(brain)
    number, edge = next(
        (i + 1, o) for i, o in enumerate(lines) if o.get("relationship_type") == "depends_on"
    )
    other = make_brain("other")
    assert import_jsonl(other, _dumped(lines)).consolidations == 1  # the real ones are kept
    forged = make_brain("forged")
    lines[number - 1] = {**edge, "relationship_type": "consolidated_from"}
    rule = (
        rf'^line {number}\.relationship_type: "consolidated_from" edges are written by '
        "octobrain itself: one is imported only with the consolidation record that names it"
    )
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(forged, _dumped(lines))
    # One naming a record's edge id, but not from its parent to a member, is no better.
    record = next(o["record"] for o in lines if o["kind"] == "consolidation")
    at = next(i for i, o in enumerate(lines) if o.get("id") == record["edge_ids"][0])
    lines[number - 1] = edge
    lines[at] = {**lines[at], "source_id": edge["source_id"]}
    with pytest.raises(InvalidInput, match=rf'^line {at + 1}\.relationship_type: "consolidated_f'):
        import_jsonl(forged, _dumped(lines))
    assert forged.store.count() == 0
    assert forged.store.relationships_of([edge["source_id"], edge["target_id"]]) == []


def test_a_consolidation_s_links_are_not_stored_without_its_record(
    make_brain: MakeBrain,
) -> None:
    # A store holding the goal and its finding from an earlier backup imported the later one:
    # the members were skipped (held, unconsolidated) and their record not stored, but the
    # consolidated_from links to them were, where nothing could remove them.
    source = make_brain("src")
    goal, _ = source.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    finding, _ = source.memorize(
        "Rate limiting decision",
        "API rate limiting uses a token bucket per key: 100 requests per minute, burst 20.",
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    target = make_brain("target")
    import_jsonl(target, _dumped(_lines(source)))
    source.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    report = import_jsonl(target, _dumped(_lines(source)))
    assert (report.imported, report.consolidations, report.consolidations_not_brought) == (1, 0, 1)
    assert report.relationships_not_stored >= 1
    assert target.get(finding.id).state is State.WORKING
    kinds = {r.relationship_type for r in target.store.relationships_of([finding.id, goal.id])}
    assert RelationshipType.CONSOLIDATED_FROM not in kinds
    assert RelationshipType.CLOSES in kinds  # the closing note's own link is kept


def _memories_and_link(brain: Brain) -> list[dict[str, Any]]:
    """An export (with vectors) of a closed goal and two memories joined by a link."""
    _closed_goal(brain)
    queue, _ = brain.memorize("Queue", "Billing events go through SQS FIFO.", importance=0.8)
    brain.memorize(
        "Postgres primary",
        "Postgres 16 is the primary database; Redis only caches sessions.",
        related_to=[{"target_id": queue.id, "relationship_type": "depends_on"}],
    )
    return _lines(brain, embeddings=True)


@pytest.mark.parametrize(
    ("kind", "rename", "added", "rule"),
    [
        ("memory", "importance", "improtance", "unknown field of a memory row"),
        ("memory", None, "foo", "unknown field of a memory row"),
        ("relationship", "strength", "strenght", "unknown field of a relationship row"),
        ("relationship", None, "foo", "unknown field of a relationship row"),
        ("header", None, "foo", "unknown field of a header line"),
        ("header", "count", "cuont", "unknown field of a header line"),
        ("end", None, "foo", "unknown field of an end line"),
    ],
)
def test_an_unknown_field_of_a_row_is_refused_not_read_as_its_default(
    make_brain: MakeBrain, kind: str, rename: str | None, added: str, rule: str
) -> None:
    # `improtance` for `importance`: "imported 10 memories", exit 0, importance 0.5 for 0.8.
    lines = _memories_and_link(make_brain("src"))
    at = max(i for i, o in enumerate(lines) if o["kind"] == kind)
    row = {k: v for k, v in lines[at].items() if k != rename}
    lines[at] = {**row, added: lines[at].get(rename, 1) if rename else 1}
    other = make_brain("other")
    with pytest.raises(InvalidInput, match=rf"^line {at + 1}\.{added}: {rule}$"):
        import_jsonl(other, _dumped(lines))
    assert other.store.count() == 0


def _every_kind(make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch) -> Brain:
    """A store holding every kind of thing an export writes: global and project memories, a
    session's chain, a link of each type a caller makes, edited and forgotten memories, a goal
    closed (one of its findings forgotten since), a sleep pass rolled back by a crash and one
    undone by `unconsolidate`."""
    brain = make_brain("src")
    members = twins(brain)
    with monkeypatch.context() as patched:  # a pass killed before its memories' commit

        def killed(step: str) -> None:
            if step == "edges":
                raise OSError("killed")

        patched.setattr(consolidation, "_checkpoint", killed)
        with pytest.raises(Exception, match="killed"):
            brain.sleep_consolidate()
    assert brain.consolidator.repair() == 1
    merged = brain.sleep_consolidate().consolidations[0].parent.id
    brain.unconsolidate(merged)
    brain.forget([members[3]], confirm=True)
    brain.memorize("Team convention", "Every service logs JSON lines.", global_=True)
    _, finding, _ = _closed_goal(brain)
    brain.forget([finding], confirm=True)  # its record stays, naming it
    goal_b, _ = brain.memorize("Goal: cheaper CI", "Halve the CI bill.", memory_type="goal")
    found = [
        brain.memorize(
            title, text, related_to=[{"target_id": goal_b.id, "relationship_type": "achieves"}]
        )[0].id
        for title, text in [
            ("CI runners", "CI runs on spot instances, retried on eviction."),
            ("CI cache", "CI caches the cargo registry between runs."),
        ]
    ]
    closes = [{"target_id": goal_b.id, "relationship_type": "closes"}]
    brain.memorize("CI bill halved", "The CI bill went from 4k to 1.9k a month.", related_to=closes)
    brain.forget([found[0]], confirm=True)
    session = make_brain("src", session="sess-1")
    ids = [
        session.memorize(title, text, tags=["billing"])[0].id
        for title, text in [
            ("Queue", "Billing events go through SQS FIFO queues."),
            ("Old queue", "Billing events went through RabbitMQ until March."),
            ("Worker pool", "The billing worker pool runs 8 processes per node."),
            ("Postgres primary", "Postgres 16 is the primary database."),
        ]
    ]
    kinds = ["related_to", "depends_on", "supersedes", "similar", "conflicts", "implements"]
    for i, kind in enumerate([*kinds, "extends"]):
        brain.relate(ids[i % 4], ids[(i + 1 + i // 4) % 4], kind)
    open_goal, _ = brain.memorize(
        "Goal: no downtime", "Deploys drop no request.", memory_type="goal"
    )
    brain.relate(ids[0], open_goal.id, "achieves")
    brain.update(ids[3], content="Postgres 16 is the primary database, 3 replicas.", importance=0.9)
    scratch, _ = brain.memorize("Scratch", "A note about nothing much, to forget.",
                                related_to=[{"target_id": ids[1]}])  # fmt: skip
    brain.forget([scratch.id], confirm=True)
    return brain


@pytest.mark.parametrize("version", [1, 2])
def test_every_field_an_export_writes_is_read_back(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    # A store where a consolidation was rolled back by a crash could not be imported
    # ("status: must be one of pending, done, reverting, reverted, got 'abandoned'"); one
    # undone by `unconsolidate` lost its record (the next sleep pass merged the memories the
    # user had taken apart again), and a goal whose finding was forgotten lost its record and
    # link (it could no longer be undone).
    brain = _every_kind(make_brain, monkeypatch)
    lines = _lines(brain, embeddings=True)
    assert {o["scope"] for o in lines if o["kind"] == "memory"} == {SCOPE, ""}
    kinds = {o["relationship_type"] for o in lines if o["kind"] == "relationship"}
    assert kinds == {t.value for t in RelationshipType} - {"auto_linked"}
    statuses = [o["record"]["status"] for o in lines if o["kind"] == "consolidation"]
    assert sorted(statuses) == ["abandoned", "done", "done", "reverted"]
    if version == 1:  # (before the end line)
        lines = [{**lines[0], "version": 1}, *lines[1:-1]]
    other = make_brain("other")
    report = import_jsonl(other, _dumped(lines))
    assert (report.imported, report.reembedded, report.consolidations) == (14, 0, 4)
    assert (report.consolidations_not_brought, report.relationships_not_stored) == (0, 0)
    assert report.relationships == sum(o["kind"] == "relationship" for o in lines)
    assert _lines(other, embeddings=True)[1:] == _lines(brain, embeddings=True)[1:]
    assert other.sleep_consolidate().consolidations == []  # the user's undo holds


def test_an_unknown_field_is_named_in_one_short_line(make_brain: MakeBrain) -> None:
    lines = _memories_and_link(make_brain("src"))
    lines[1] = {**lines[1], "\x1b[2J" + "x" * 100_000: 1}
    with pytest.raises(InvalidInput) as caught:
        import_jsonl(make_brain("other"), _dumped(lines))
    assert str(caught.value).startswith('line 2."\\u001b[2J') and len(str(caught.value)) < 200


def test_a_memory_row_without_a_scope_is_refused_and_an_empty_one_is_global(
    make_brain: MakeBrain,
) -> None:
    # A project's note without `scope` was imported global ("(1 global)"), seen by every
    # project, though the header named the project.
    lines = _memories_and_link(make_brain("src"))
    assert lines[0]["scope"] == SCOPE and lines[1]["scope"] == SCOPE
    row = {k: v for k, v in lines[1].items() if k != "scope"}
    other = make_brain("other")
    rule = r'^line 2\.scope: required: the memory\'s project, or "" for global$'
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, _dumped([lines[0], row, *lines[2:]]))
    assert other.store.count() == 0
    report = import_jsonl(other, _dumped([lines[0], {**row, "scope": ""}, *lines[2:]]))
    assert report.scopes == {SCOPE: 4, "": 1}
    assert other.get(row["id"]).scope == ""


def test_a_link_dated_ahead_is_refused_as_a_memory_row_is(make_brain: MakeBrain) -> None:
    lines = _memories_and_link(make_brain("src"))
    at = max(i for i, o in enumerate(lines) if o["kind"] == "relationship")
    lines[at] = {**lines[at], "created_at": "9999-01-01T00:00:00Z"}
    other = make_brain("other")
    rule = rf"^line {at + 1}\.created_at: must not be more than a day ahead of now"
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, _dumped(lines))
    assert other.store.count() == 0


def test_a_file_has_one_header_and_it_comes_first(make_brain: MakeBrain) -> None:
    # A second header mid-file was taken silently, its model and dim ruling the rows after it.
    lines = _dumped(_memories_and_link(make_brain("src")))
    other = make_brain("other")
    second = json.dumps({**json.loads(lines[0]), "embedding_model": "hash:32", "dim": 32})
    with pytest.raises(
        InvalidInput, match=r"^line 3: is a second header line \(the first is line 1\)$"
    ):
        import_jsonl(other, ended([*lines[:2], second, *lines[2:]]))
    with pytest.raises(
        InvalidInput, match=r"^line 1: comes before the file's octobrain-export header"
    ):
        import_jsonl(other, [lines[1], lines[0], *lines[2:]])
    assert other.store.count() == 0
    assert import_jsonl(other, ["", *lines]).imported == 5  # (a blank line is no line)


@pytest.mark.parametrize("kind", ["relationship", "consolidation"])
def test_a_link_or_record_without_a_scope_is_refused(make_brain: MakeBrain, kind: str) -> None:
    # Either was imported global, whatever the project its memories live in.
    lines = _memories_and_link(make_brain("src"))
    at = max(i for i, o in enumerate(lines) if o["kind"] == kind)
    if kind == "relationship":
        lines[at] = {k: v for k, v in lines[at].items() if k != "scope"}
        field, whose = "scope", "link's"
    else:
        record = {k: v for k, v in lines[at]["record"].items() if k != "scope"}
        lines[at] = {**lines[at], "record": record}
        field, whose = "record.scope", "consolidation's"
    other = make_brain("other")
    rule = rf'^line {at + 1}\.{field}: required: the {whose} project, or "" for global$'
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, _dumped(lines))
    assert other.store.count() == 0


@pytest.mark.parametrize(
    ("field", "done"), [("updated_at", "edited"), ("last_accessed", "recalled")]
)
def test_a_memory_edited_or_recalled_before_it_was_made_is_refused(
    make_brain: MakeBrain, field: str, done: str
) -> None:
    # A last access years before the memory was made (an edited file) was imported as it was:
    # the memory ranked as one unused all that time, at the decay floor.
    lines = _memories_and_link(make_brain("src"))
    row = lines[1]
    other = make_brain("other")
    rule = (
        rf"^line 2\.{field}: must not be more than a day earlier than created_at "
        rf"\(.+\), got 2001-01-01T00:00:00Z: a memory is not {done} before it is made$"
    )
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, _dumped([lines[0], {**row, field: "2001-01-01T00:00:00Z"},
                                     *lines[2:]]))  # fmt: skip
    assert other.store.count() == 0
    # An ingested turn said ahead of the clock (a day at most) is edited and recalled "before"
    # it was said.
    said = datetime.fromisoformat(row["created_at"]) + timedelta(hours=20)
    turn = {**row, "created_at": said.isoformat()}
    assert import_jsonl(other, _dumped([lines[0], turn, *lines[2:]])).imported == 5
    # A row made in the first day of year 1 has no day before it to compare with (it was an
    # OverflowError traceback, nothing imported).
    first = dict.fromkeys(("created_at", "updated_at", "last_accessed"), "0001-01-01T03:00:00Z")
    oldest = make_brain("oldest")
    assert import_jsonl(oldest, _dumped([lines[0], {**row, **first}, *lines[2:]])).imported == 5
    assert oldest.get(row["id"]).created_at.year == 1


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"count": 4}, r"^file: holds 5 memory lines where its header counts 4: it was cut"),
        ({"count": "5"}, r"^line 1\.count: must be a whole number >= 0$"),
        ({"dim": "64"}, r"^line 1\.dim: must be an integer in \[1, 8192\]$"),
        ({"embedding_model": 7}, r"^line 1\.embedding_model: must be a model name of 1–256"),
        (
            {"scope": "github.com/acme/web"},
            r'^line 2\.scope: is "github.com/acme/api", where the file.s header scope is '
            r'"github.com/acme/web": an export holds the rows of its scope and global ones$',
        ),
        (
            {"scope": ""},
            r'^line 2\.scope: is "github.com/acme/api", where the file.s header '
            r"scope is global \(\"\"\): an export of the global scope holds global rows only$",
        ),
        ({"scope": "git@github.com:"}, r"^line 1\.scope: "),
    ],
)
def test_a_header_that_contradicts_its_rows_is_refused(
    make_brain: MakeBrain, change: dict[str, Any], rule: str
) -> None:
    # Each was imported: the header's count and scope were read by nothing but a v1 file's
    # check, its dim ignored when it was no number.
    lines = _memories_and_link(make_brain("src"))
    other = make_brain("other")
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, _dumped([{**lines[0], **change}, *lines[1:]]))
    assert other.store.count() == 0


def test_a_json_array_is_refused_saying_what_an_import_file_is(make_brain: MakeBrain) -> None:
    # Before: "line 1: is not JSON (Expecting value)" for an indented array, "line 1: must be a
    # JSON object" for one on a line: nothing said the file is to be JSON Lines.
    brain = make_brain()
    brain.memorize("Deploy plan", "Blue green deploys, one region at a time.")
    lines = _lines(brain)
    jsonl = "import reads an octobrain export: JSON Lines, one JSON object per line"
    for given, what in (
        (lines, "an export's lines"),
        ([o for o in lines if o["kind"] == "memory"], "memory objects"),
        ([{"title": "Deploy plan", "content": "Blue green."}], "memory objects"),
    ):
        for text in (json.dumps(given, indent=2), json.dumps(given)):
            with pytest.raises(InvalidInput, match=rf"^line 1: starts a JSON array of {what}; "):
                import_jsonl(brain, text.splitlines())
    with pytest.raises(InvalidInput, match=rf"^line 1: starts a JSON array; {jsonl}"):
        import_jsonl(brain, ["[1,", "2]"])


def test_a_library_import_told_another_projects_scope_is_refused_as_the_cli_refuses_it(
    make_brain: MakeBrain,
) -> None:
    # Before, the rule lived in `memory import` alone: a library caller that chose the global
    # scope (or another project's) for a file of SCOPE's memories had them written in SCOPE,
    # where it did not look.
    source = make_brain()
    source.memorize("Primary database", "Postgres 16 is the primary database.")
    lines = _dumped(_lines(source))
    for scope, given in (("", "--global"), ("github.com/acme/web", "--scope github.com/acme/web")):
        told = make_brain("copy", scope=scope)
        option = given.partition(" ")[0]
        with pytest.raises(InvalidInput, match=rf'^{option}: .* holds memories of "{SCOPE}"'):
            import_jsonl(told, lines, given=given)
        assert told.store.count() == 0  # nothing was imported
    # Its own project's scope, or none chosen: imported, each memory in its own scope.
    assert import_jsonl(make_brain("own"), lines, given=f"--scope {SCOPE}").imported == 1
    assert import_jsonl(make_brain("any", scope=""), lines).scopes == {SCOPE: 1}
