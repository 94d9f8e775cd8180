"""Goals and unconsolidate: a closing note consolidates its findings, a goal's summary parent is
made and removed, every row and edge given back, a lost journal named on export."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory import goals
from octobrain.memory.render import format_stored
from octobrain.models import MemoryType, RelationshipType, Source
from tests.consolidation_support import OTHER, MakeBrain, all_edges, raw_rows, twins
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared


def _without_access(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("access_count", "last_accessed")}


# ---- goals --------------------------------------------------------------------------------


def test_goal_workflow_closing_note_consolidates_in_the_same_call(make_brain: MakeBrain) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Ship rate limiting", "Goal: rate limit the public API before launch.", memory_type="goal"
    )
    findings = [
        brain.memorize(
            f"Finding {i}",
            text,
            importance=imp,
            related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
        )[0]
        for i, (text, imp) in enumerate(
            [
                ("Token bucket per key chosen for rate limiting.", 0.6),
                ("Limits live in config/limits.toml, reloaded on SIGHUP.", 0.8),
            ]
        )
    ]
    unrelated, _ = brain.memorize(*OTHER[0])
    before = raw_rows(brain)
    closing, edges = brain.memorize(
        "Rate limiting shipped",
        "Rate limiting is live: token bucket per key, limits in config/limits.toml.",
        importance=0.3,
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert closing.importance == pytest.approx(0.88)  # max(0.6, 0.8) × 1.1
    kinds = sorted(e.relationship_type.value for e in edges)
    assert kinds == ["closes", "consolidated_from", "consolidated_from"]
    rows = raw_rows(brain)
    assert rows[closing.id]["importance"] == pytest.approx(0.88)
    assert [rows[f.id]["state"] for f in findings] == ["consolidated", "consolidated"]
    assert [rows[f.id]["importance"] for f in findings] == pytest.approx([0.12, 0.16])
    assert rows[goal.id]["state"] == rows[unrelated.id]["state"] == "working"
    hits = brain.remember("rate limiting token bucket", limit=5).hits
    assert hits[0].memory.id == closing.id

    undone = brain.unconsolidate(closing.id)
    assert sorted(undone.restored) == sorted(f.id for f in findings) and not undone.parent_removed
    after = raw_rows(brain)
    assert after[closing.id]["importance"] == pytest.approx(0.3)  # the note is kept, as written
    for f in findings:  # bit for bit, updated_at included (the remember above counted an access)
        assert _without_access(after[f.id]) == _without_access(before[f.id])


def test_a_close_consolidates_a_bounded_batch_of_findings_oldest_first(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A goal with 30,000 findings made one closing `memorize` take 5–15 s and 1.9 GB and
    # answer 2 MB, one line per finding: a close now takes a batch, and says what is left.
    monkeypatch.setattr(goals, "CLOSE_BATCH", 2)
    brain = make_brain()
    goal, _ = brain.memorize("Harden the API", "Goal: close every known hole.", memory_type="goal")
    link = [{"target_id": goal.id, "relationship_type": "achieves"}]
    findings = [
        brain.memorize(f"Hole {i} fixed", f"Fixed hole number {i} in the API.", related_to=link)[0]
        for i in range(5)
    ]
    note, edges = brain.memorize(
        "API hardened",
        "Every known hole in the API is closed.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    taken = [
        e.target_id for e in edges if e.relationship_type is RelationshipType.CONSOLIDATED_FROM
    ]
    assert taken == [findings[0].id, findings[1].id]  # the oldest first
    assert brain.findings_left(edges) == 3
    reply = format_stored(note, edges, brain.findings_left(edges))
    assert f"Goal {goal.id} still has 3 working findings" in reply, reply
    assert [raw_rows(brain)[f.id]["state"] for f in findings] == ["consolidated"] * 2 + [
        "working"
    ] * 3
    done = brain.consolidate_goal(goal.id)  # the next batch, under the closing note
    assert done.parent.id == note.id and [m.id for m in done.members] == [
        findings[2].id,
        findings[3].id,
    ]
    assert "1 more still working" in done.description
    assert [m.id for m in brain.consolidate_goal(goal.id).members] == [findings[4].id]
    with pytest.raises(InvalidInput, match="^goal_id: no working memory"):
        brain.consolidate_goal(goal.id)


def test_consolidate_goal_synthesises_a_summary_parent_and_unconsolidate_removes_it(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    goal, _ = brain.memorize("Cut p95 latency", "Goal: p95 under 200 ms.", memory_type="goal")
    link = [{"target_id": goal.id, "relationship_type": "achieves"}]
    a, _ = brain.memorize("Cache", "Added a read-through cache for sessions.", related_to=link)
    b, _ = brain.memorize(
        "Index", "Added an index on orders.created_at.", related_to=link, source="user_confirmed"
    )
    with pytest.raises(InvalidInput, match="^goal_id: memory .* is a code, not a goal"):
        brain.consolidate_goal(a.id)
    done = brain.consolidate_goal(goal.id)
    assert done.synthesised and done.parent.memory_type is MemoryType.INSIGHT
    assert done.parent.source is Source.AGENT_INFERRED  # the least trusted source's tier
    assert (
        "read-through cache" in done.parent.content and "orders.created_at" in done.parent.content
    )
    closes = [
        e for e in all_edges(brain).values() if e.relationship_type is RelationshipType.CLOSES
    ]
    assert [(e.source_id, e.target_id) for e in closes] == [(done.parent.id, goal.id)]
    with pytest.raises(InvalidInput, match="^goal_id: no working memory"):
        brain.consolidate_goal(goal.id)  # already closed

    undone = brain.unconsolidate(done.parent.id)
    assert undone.parent_removed and sorted(undone.restored) == sorted([a.id, b.id])
    rows = raw_rows(brain)
    assert done.parent.id not in rows
    assert {rows[a.id]["state"], rows[b.id]["state"]} == {"working"}
    assert not [
        e for e in all_edges(brain).values() if done.parent.id in (e.source_id, e.target_id)
    ]
    with pytest.raises(InvalidInput, match="^parent_id: no consolidation in force"):
        brain.unconsolidate(done.parent.id)


# ---- reversibility ------------------------------------------------------------------------


def test_unconsolidate_restores_every_row_and_edge_bit_for_bit(make_brain: MakeBrain) -> None:
    brain = make_brain()
    ids = twins(brain)
    brain.memorize(*OTHER[1], importance=0.7)
    before_rows, before_edges = raw_rows(brain), all_edges(brain)
    report = brain.sleep_consolidate()
    parent = report.consolidations[0].parent
    mid = raw_rows(brain)
    assert [mid[i]["pre_consolidation_importance"] for i in ids] == [0.5] * 4
    brain.unconsolidate(parent.id)
    assert raw_rows(brain) == before_rows  # every column, embeddings and timestamps included
    assert all_edges(brain) == before_edges
    # Undone members are left alone by later passes.
    assert brain.sleep_consolidate().consolidations == []


def test_export_names_a_lost_consolidation_journal_instead_of_leaving_it_out(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A journal directory gone read as "never consolidated": the backup left the records
    # out and said nothing (exit 0), so an unconsolidate after restoring it could not undo.
    import io

    from octobrain.errors import StorageError
    from octobrain.memory.export import export_jsonl

    brain = make_brain()
    twins(brain)
    assert brain.sleep_consolidate().consolidations
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()
    shutil.rmtree(tmp_path / "consolidations.lance")
    again = make_brain()
    with pytest.raises(StorageError, match="table 'consolidations' .* is damaged or missing"):
        export_jsonl(again, io.StringIO())
