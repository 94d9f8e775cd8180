"""SIGKILL writers at random moments: the store opens, nothing acknowledged is lost, nothing
half-done is visible. A few seeds here; `benches/soak.py` runs many."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from octobrain.store.consolidations import ConsolidationLog
from tests.consolidation_support import twins
from tests.reliability.kills import (
    brain_at,
    check_memorize,
    check_reembed,
    check_reindex,
    guide,
    kill_randomly,
    knowledge_at,
)
from tests.test_consolidation_crash import assert_consistent, assert_no_dangling

SEEDS = [1, 2]


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_memorize_loses_no_acknowledged_write(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    uri = tmp_path / "db"
    before = {brain_at(uri).memorize("Earlier note", "Written before the kills.")[0].id}
    for _ in range(2):
        acked, _ = kill_randomly(uri, "memorize", rng, window_s=0.3)
        assert check_memorize(uri, acked, before) == []
        before |= set(acked)


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_sleep_pass_is_whole_or_invisible(tmp_path: Path, seed: int) -> None:
    uri = tmp_path / "db"
    members = twins(brain_at(uri))
    kill_randomly(uri, "sleep", random.Random(seed), window_s=1.5)
    fresh = brain_at(uri)
    assert_consistent(fresh, members)
    fresh.sleep_consolidate()  # repairs, then finishes the work
    assert assert_consistent(fresh, members) == "consolidated"
    assert_no_dangling(fresh)
    assert ConsolidationLog(fresh.store).unfinished() == []


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_reembed_leaves_one_whole_model(tmp_path: Path, seed: int) -> None:
    uri = tmp_path / "db"
    brain = brain_at(uri)
    ids = {
        brain.memorize(f"Reembedded fact {i}", f"Fact number {i} to re-embed.")[0].id
        for i in range(8)
    }
    _, finished = kill_randomly(uri, "reembed", random.Random(seed), model="hash:32", window_s=1.0)
    model, problems = check_reembed(uri, ids)
    assert problems == []
    if finished:
        assert model == "hash:32"


@pytest.mark.parametrize("seed", SEEDS)
def test_killed_reindex_shows_one_whole_generation(tmp_path: Path, seed: int) -> None:
    uri, doc = tmp_path / "db", tmp_path / "guide.md"
    knowledge_at(uri).index(str(guide(doc, "bluegreen")))
    guide(doc, "rainbow")
    _, finished = kill_randomly(
        uri, "reindex", random.Random(seed), window_s=1.5, extra=(str(doc),)
    )
    generation, problems = check_reindex(uri, 60)
    assert problems == []
    if finished:
        assert generation == "new"
    knowledge_at(uri).index(str(doc))  # the next index completes it
    assert check_reindex(uri, 60) == ("new", [])
