"""Consolidation records and edges through export and import: checked field by field, kept to
the memories the file brought and to one project, every edge written."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.errors import InvalidInput
from octobrain.memory import export, import_check
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.render import memory_to_dict
from octobrain.memory.transfer import import_jsonl
from octobrain.models import Relationship, RelationshipType, State
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared
from tests.export_lines import ended


def test_an_imported_store_can_still_undo_its_consolidations(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    finding, _ = brain.memorize(
        *TOKEN_BUCKET,
        importance=0.7,
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    before = brain.get(finding.id)
    closing, _ = brain.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert brain.get(finding.id).state is State.CONSOLIDATED
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "copy")
    import_jsonl(other, out.getvalue().splitlines())
    assert other.get(finding.id) == brain.get(finding.id)
    other.unconsolidate(closing.id)
    restored = other.get(finding.id)
    assert (restored.state, restored.importance) == (before.state, before.importance)


def _closed_goal_export(brain: Brain) -> list[dict[str, Any]]:
    """The lines of an export holding a goal closed by a note (a consolidation record)."""
    goal, _ = brain.memorize("Goal: faster API", "Bring p95 latency under 200 ms.",
                             memory_type="goal")  # fmt: skip
    brain.memorize(
        *TOKEN_BUCKET, related_to=[{"target_id": goal.id, "relationship_type": "achieves"}]
    )
    brain.memorize("Latency goal reached", "p95 is 170 ms now.",
                   related_to=[{"target_id": goal.id, "relationship_type": "closes"}])  # fmt: skip
    out = io.StringIO()
    export_jsonl(brain, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"member_prev_importance": ["x"]}, r"record\.member_prev_importance\[0\]: must be a numb"),
        ({"member_prev_state": ["bogus"]}, r"record\.member_prev_state\[0\]: must be working,"),
        (
            {"member_prev_pre": [None, None]},
            r"record\.member_prev_pre: must be a list of 1, one per",
        ),
        ({"kind": None}, r"record\.kind: must be one of sleep, goal, got null"),
        ({"status": "bogus"}, r"record\.status: must be one of pending, done, reverting, reverted"),
        ({"parent_id": {}}, r"record\.parent_id: must be a non-empty string"),
        ({"scope": 10**30}, r"record\.scope: must be a string"),
        ({"parent_synthesised": 1}, r"record\.parent_synthesised: must be true or false"),
        ({"edge_ids": ["e"]}, r"record\.edge_ids\[0\]: must be a memory id"),
        ({"description": "d" * 20_000}, r"record\.description: must be 0–10000 bytes"),
        ({"surprise": 1}, r"record\.surprise: unknown field of a consolidation record"),
    ],
)
def test_an_imported_consolidation_record_is_checked_field_by_field_before_any_write(
    make_brain: MakeBrain, tmp_path: Path, change: dict[str, Any], rule: str
) -> None:
    # Each was either stored as it came (and acted on by the next sleep pass) or failed with a
    # traceback after the file's memories had been written.
    lines = _closed_goal_export(make_brain())
    line, record = next((i + 1, o) for i, o in enumerate(lines) if o["kind"] == "consolidation")
    lines[line - 1] = {"kind": "consolidation", "record": {**record["record"], **change}}
    other = Brain("import/target", config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    with pytest.raises(InvalidInput, match=rf"^line {line}\.{rule}"):
        import_jsonl(other, [json.dumps(o) for o in lines])
    assert other.store.count() == 0


def test_an_imported_record_cannot_reach_memories_or_edges_the_file_did_not_bring(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A `reverting` record names a memory the store already held as its synthesised parent:
    # the next sleep pass, finishing the "undo", deleted that memory. An edge of the file
    # that took an existing edge's id was stored beside it, and the store no longer exported
    # to a file that imports.
    brain = make_brain()
    kept, _ = brain.memorize(*POSTGRES)
    other_end, _ = brain.memorize("Queue", "Billing events go through SQS FIFO.")
    existing = brain.relate(kept.id, other_end.id)
    source = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "src")
    lines = _closed_goal_export(source)
    record = next(o["record"] for o in lines if o["kind"] == "consolidation")
    forged = {**record, "id": str(uuid.uuid4()), "status": "reverting", "parent_id": kept.id,
              "parent_synthesised": True}  # fmt: skip
    edge = next(o for o in lines if o["kind"] == "relationship")
    lines += [{"kind": "consolidation", "record": forged}, {**edge, "id": existing.id}]
    report = import_jsonl(brain, ended([json.dumps(o) for o in lines]))
    assert (report.imported, report.consolidations, report.consolidations_not_brought) == (3, 1, 1)
    brain.sleep_consolidate()  # finishes or undoes what is left half-way
    assert brain.get(kept.id).content == POSTGRES[1]
    out = io.StringIO()
    export_jsonl(brain, out)
    assert out.getvalue().count(existing.id) == 1
    again = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "again")
    assert import_jsonl(again, out.getvalue().splitlines()).imported == brain.store.count()


def test_export_writes_every_edge_between_its_memories_however_many_batches_they_fill(
    make_brain: MakeBrain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "BATCH", 1)  # edges are read 16 at a time
    monkeypatch.setattr(import_check, "BATCH", 1)  # and spooled one at a time as imported
    brain = make_brain()
    mine = [brain.memorize(f"Decision number {i}", f"We chose option {i}.")[0] for i in range(8)]
    theirs, _ = make_brain("other/project").memorize(*POSTGRES)
    chain = [
        Relationship(a.id, b.id, RelationshipType.RELATED_TO, scope=brain.scope)
        for a in mine
        for b in mine
        if a is not b
    ]
    brain.store.add_relationships(
        [*chain, Relationship(mine[0].id, theirs.id, RelationshipType.RELATED_TO)]
    )
    out = io.StringIO()
    export_jsonl(brain, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(r["id"] for r in rows if r["kind"] == "relationship") == sorted(
        r.id for r in chain
    )
    again = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "again")
    assert import_jsonl(again, out.getvalue().splitlines()).relationships == len(chain)


def test_an_imported_edge_never_joins_two_projects_and_one_not_stored_is_counted(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A file listing another project's memory by its id (skipped: the store has it) joined it to
    # its own memory with an edge, which `relate` refuses; an edge whose end nobody holds was
    # dropped without a word.
    target = make_brain()
    theirs, _ = make_brain("other/project").memorize(*POSTGRES)
    source = Brain("import/source", config=Config(), embedder=target.embedder,
                   uri=tmp_path / "src")  # fmt: skip
    ours, _ = source.memorize(*TOKEN_BUCKET)
    shared, _ = source.memorize("Team convention", "Every service logs JSON.", global_=True,
                                related_to=[{"target_id": ours.id}])  # fmt: skip
    out = io.StringIO()
    export_jsonl(source, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    edge = next(o for o in lines if o["kind"] == "relationship")
    lines += [
        {"kind": "memory", **memory_to_dict(theirs)},
        {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": theirs.id,
         "scope": "import/source"},
        {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": str(uuid.uuid4()),
         "scope": "import/source"},
    ]  # fmt: skip
    at = len(lines) - 3  # (the other project's row; the export's end line left out)
    with pytest.raises(InvalidInput, match=rf"^line {at}\.scope: is \"other/project\", where the"):
        import_jsonl(target, ended([json.dumps(o) for o in lines]))
    lines[0] = {k: v for k, v in lines[0].items() if k != "scope"}  # (a header naming none)
    report = import_jsonl(target, ended([json.dumps(o) for o in lines]))
    assert (report.imported, report.skipped_existing) == (2, 1)
    assert (report.relationships, report.relationships_not_stored) == (1, 2)
    assert [(r.source_id, r.target_id) for r in target.store.relationships_of([ours.id])] == [
        (shared.id, ours.id)
    ]
    assert target.store.relationships_of([theirs.id]) == []
    # A memory linked to itself, which `relate` refuses, was imported and shown by `graph`.
    loop = {**edge, "id": str(uuid.uuid4()), "source_id": ours.id, "target_id": ours.id}
    # (named, as `relate` names it: the rule alone did not say which memory of thousands)
    rule = rf"must differ from source_id: both are memory {ours.id}, and a memory does not link"
    with pytest.raises(InvalidInput, match=rf"^line {len(lines)}\.target_id: {rule} to itself$"):
        import_jsonl(target, ended([json.dumps(o) for o in [*lines, loop]]))
