"""A sleep pass reads and plans its merges before it takes the write lock; another process that
edits or forgets a member in between keeps its acknowledged write.

The other process is a real one (a child running `Brain.update` / `forget` on the same store),
run at the moment between the pass's plan and its commit (`sleep._commit_clusters`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from octobrain.memory import sleep
from octobrain.memory.brain import Brain
from tests.consolidation_support import SCOPE, MakeBrain, raw_rows, twins
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared

EDITED = "Deploys run through the blue green pipeline; the smoke test now gates the switch."
CHILD = textwrap.dedent(
    """
    import sys
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    uri, scope, action, memory_id = sys.argv[1:5]
    brain = Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    if action == "update":
        brain.update(memory_id, content=sys.argv[5])
    else:
        brain.forget([memory_id], confirm=True)
    """
)


def between_plan_and_commit(monkeypatch: pytest.MonkeyPatch, brain: Brain, *args: str) -> None:
    """Run `args` (update ID TEXT, or forget ID) in another process once, after `brain`'s
    next pass planned its merges and before it commits them."""
    real, pending = sleep._commit_clusters, [args]
    uri = str(brain.store.location.path)

    def wrapped(*a: Any, **kw: Any) -> Any:
        while pending:
            argv = [sys.executable, "-c", CHILD, uri, SCOPE, *pending.pop()]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        return real(*a, **kw)

    monkeypatch.setattr(sleep, "_commit_clusters", wrapped)


def test_a_member_updated_by_another_process_while_the_pass_plans_keeps_the_update(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain()
    ids = twins(brain)
    between_plan_and_commit(monkeypatch, brain, "update", ids[1], EDITED)
    report = brain.sleep_consolidate(threshold=0.9, min_size=4)
    assert (report.consolidations, report.skipped) == ([], 1)
    rows = raw_rows(make_brain())
    assert rows[ids[1]]["content"] == EDITED  # the other process's update stands
    assert {rows[i]["state"] for i in ids} == {"working"}
    # The next pass merges the members as they are now.
    (done,) = make_brain().sleep_consolidate(threshold=0.5, min_size=4).consolidations
    assert sorted(m.id for m in done.members) == sorted(ids)
    assert "the smoke test now gates the switch" in done.parent.content


def test_a_member_forgotten_by_another_process_while_the_pass_plans_stays_forgotten(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain()
    ids = twins(brain)
    between_plan_and_commit(monkeypatch, brain, "forget", ids[2])
    report = brain.sleep_consolidate(threshold=0.9, min_size=3)
    assert (report.consolidations, report.skipped) == ([], 1)
    rows = raw_rows(make_brain())
    assert ids[2] not in rows  # not brought back as a member
    assert {rows[i]["state"] for i in ids if i != ids[2]} == {"working"}
    (done,) = make_brain().sleep_consolidate(threshold=0.9, min_size=3).consolidations
    assert sorted(m.id for m in done.members) == sorted(i for i in ids if i != ids[2])
