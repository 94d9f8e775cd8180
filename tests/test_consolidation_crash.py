"""A process killed (SIGKILL) between any two commits of a consolidation or an unconsolidate
leaves a store that opens, shows no half-consolidated cluster, and is repaired by the next
consolidation: finished when its memory commit landed, rolled back when it did not."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import RelationshipType
from octobrain.store.consolidations import ConsolidationLog
from octobrain.store.doctor import diagnose
from tests.consolidation_support import SCOPE, all_edges, raw_rows, twins

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from octobrain.memory import consolidation
    from octobrain.memory.brain import Brain
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, op, step, arg = sys.argv[1:5]

    def checkpoint(name):
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    consolidation._checkpoint = checkpoint
    brain = Brain(sys.argv[5], config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    if op == "sleep":
        brain.sleep_consolidate()
    elif op == "unconsolidate":
        brain.unconsolidate(arg)
    else:
        brain.memorize(
            "Rate limiting shipped",
            "Rate limiting is live with a token bucket per key.",
            related_to=[{"target_id": arg, "relationship_type": "closes"}],
        )
    """
)


def brain_at(path: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=path)


def kill_at(path: Path, op: str, step: str, arg: str = "-") -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), op, step, arg, SCOPE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def assert_consistent(brain: Brain, members: list[str]) -> str:
    """All members in one state, a visible parent exactly when they are consolidated; returns
    the common state. Edges to a parent that does not exist are invisible to readers."""
    rows, edges = raw_rows(brain), all_edges(brain)
    states = {rows[m]["state"] for m in members}
    assert len(states) == 1, f"half-consolidated: {states}"
    parents = {
        e.source_id
        for e in edges.values()
        if e.relationship_type is RelationshipType.CONSOLIDATED_FROM
        and e.target_id in members
        and e.source_id in rows
    }
    assert len(parents) == (1 if states == {"consolidated"} else 0)
    brain.remember("deploy pipeline smoke test", min_relevance=0, record_access=False)
    return states.pop()


def assert_no_dangling(brain: Brain) -> None:
    rows = raw_rows(brain)
    for edge in all_edges(brain).values():
        assert edge.source_id in rows and edge.target_id in rows
    assert ConsolidationLog(brain.store).unfinished() == []


@pytest.mark.parametrize("step", ["record", "edges", "memories"])
def test_killed_sleep_pass_is_invisible_or_whole_then_repaired(tmp_path: Path, step: str) -> None:
    store = tmp_path / "db"  # where `doctor` finds it under OCTOBRAIN_DATA_DIR
    brain = brain_at(store)
    members = twins(brain)
    kill_at(store, "sleep", step)
    fresh = brain_at(store)
    state = assert_consistent(fresh, members)
    assert state == ("consolidated" if step == "memories" else "working")
    found = diagnose(fresh.store.location)  # reported, not a problem: readers are unaffected
    assert (found.ok, found.unfinished_consolidations) == (True, 1)
    shown = CliRunner().invoke(main, ["doctor"], env={"OCTOBRAIN_DATA_DIR": str(tmp_path)})
    assert shown.exit_code == 0, shown.output
    assert "consolidations: 1 left half-way (by a killed process, or a" in shown.output
    report = fresh.sleep_consolidate()  # repairs first, then (re)runs the pass
    assert diagnose(fresh.store.location).unfinished_consolidations == 0
    assert len(report.consolidations) == (0 if step == "memories" else 1)
    assert assert_consistent(fresh, members) == "consolidated"
    assert_no_dangling(fresh)
    statuses = sorted(r.status for r in ConsolidationLog(fresh.store).find("true"))
    assert statuses == (["done"] if step == "memories" else ["abandoned", "done"])


@pytest.mark.parametrize("step", ["reverting", "restored", "edges_removed"])
def test_killed_unconsolidate_is_finished_by_repair(tmp_path: Path, step: str) -> None:
    brain = brain_at(tmp_path)
    members = twins(brain)
    before = raw_rows(brain)
    parent = brain.sleep_consolidate().consolidations[0].parent.id
    kill_at(tmp_path, "unconsolidate", step, parent)
    fresh = brain_at(tmp_path)
    state = assert_consistent(fresh, members)
    assert state == ("consolidated" if step == "reverting" else "working")
    assert fresh.consolidator.repair() == 1
    assert raw_rows(fresh) == before
    assert_no_dangling(fresh)


@pytest.mark.parametrize("step", ["record", "edges", "memories"])
def test_killed_goal_close_keeps_note_and_findings_together(tmp_path: Path, step: str) -> None:
    brain = brain_at(tmp_path)
    goal, _ = brain.memorize("Ship rate limiting", "Goal: rate limit the API.", memory_type="goal")
    link = [{"target_id": goal.id, "relationship_type": "achieves"}]
    findings = [
        brain.memorize(f"Finding {i}", f"Rate limiting finding number {i}.", related_to=link)[0].id
        for i in range(2)
    ]
    kill_at(tmp_path, "close", step, goal.id)
    fresh = brain_at(tmp_path)
    rows: dict[str, Any] = raw_rows(fresh)
    notes = [r for r in rows.values() if r["title"] == "Rate limiting shipped"]
    states = {rows[f]["state"] for f in findings}
    # The closing note and the consolidation are one commit: both or neither.
    assert (len(notes), states) in [(0, {"working"}), (1, {"consolidated"})]
    assert (len(notes) == 1) == (step == "memories")
    fresh.consolidator.repair()
    assert_no_dangling(fresh)
