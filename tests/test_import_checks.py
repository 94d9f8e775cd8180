"""`memory import` refuses what an export never holds: links octobrain keeps for itself, fields
it does not know, rows without a scope, times out of order, a second header."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.transfer import export_jsonl, import_jsonl
from octobrain.models import RelationshipType, State
from tests.export_lines import ended

MakeBrain = Callable[..., Brain]
SCOPE = "github.com/acme/api"


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(name: str = "db", scope: str = SCOPE) -> Brain:
        return Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / name)

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
        rf"^line {number}\.relationship_type: 'consolidated_from' edges are written by "
        "octobrain itself: one is imported only with the consolidation record that names it"
    )
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(forged, _dumped(lines))
    # One naming a record's edge id, but not from its parent to a member, is no better.
    record = next(o["record"] for o in lines if o["kind"] == "consolidation")
    at = next(i for i, o in enumerate(lines) if o.get("id") == record["edge_ids"][0])
    lines[number - 1] = edge
    lines[at] = {**lines[at], "source_id": edge["source_id"]}
    with pytest.raises(InvalidInput, match=rf"^line {at + 1}\.relationship_type: 'consolidated_f"):
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


@pytest.mark.parametrize("version", [1, 2])
def test_every_field_an_export_writes_is_read_back(make_brain: MakeBrain, version: int) -> None:
    brain = make_brain("src")
    brain.memorize("Team convention", "Every service logs JSON lines.", global_=True)
    lines = _memories_and_link(brain)
    assert {o["scope"] for o in lines if o["kind"] == "memory"} == {SCOPE, ""}
    if version == 1:  # (before the end line)
        lines = [{**lines[0], "version": 1}, *lines[1:-1]]
    other = make_brain("other")
    report = import_jsonl(other, _dumped(lines))
    assert (report.imported, report.reembedded, report.consolidations) == (6, 0, 1)
    assert report.relationships == sum(o["kind"] == "relationship" for o in lines)
    assert _lines(other, embeddings=True)[1:] == _lines(brain, embeddings=True)[1:]


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
