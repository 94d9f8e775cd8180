"""The conflict check's budget: a pass compares a bounded number of pairs, newest first, records
what it left, and successive or daily passes reach every row of a burst."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.kernels.clustering import unit_rows
from octobrain.memory.brain import Brain
from octobrain.memory.conflicts import (
    NEAR_PER_ROW,
    PAIRS_PER_PASS,
    PAIRS_PER_ROW,
    TIE,
    Statement,
    StatementPool,
    conflicting_pairs,
    numbers,
    resolve,
)
from octobrain.memory.conflicts import _nearest_first as _nearest_first
from octobrain.models import Source
from octobrain.times import utcnow
from tests.conflicts_support import burst, outranked, timeout
from tests.consolidation_support import MakeBrain, add_at
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared


def every_row_pairs(
    recent: list[dict[str, Any]], pool: StatementPool, threshold: float, near_most: int, most: int
) -> list[tuple[str, str]]:
    """The conflict search as it was before the pass's budget: every recent row, in order
    (fewer than 512, so their cosines come from one matrix product, as they did), nearest
    first with near-equal cosines tied (`conflicts._nearest_first`)."""
    quoted = [numbers(r["content"]) for r in recent]
    order = {r["id"]: i for i, r in enumerate(recent)}
    quoting = [at for at, found in enumerate(quoted) if found]
    if not quoting:
        return []
    vectors = unit_rows(np.stack([np.asarray(recent[at]["embedding"]) for at in quoting]))
    sims_of = dict(zip(quoting, vectors @ pool.vectors.T, strict=True))
    cut: set[int] = set()
    out: list[tuple[str, str]] = []
    for at in quoting:
        row, sims = recent[at], sims_of[at]
        near = [k for k in np.flatnonzero(sims >= threshold) if pool.ids[k] != row["id"]]
        if len(near) > near_most:
            near = [k for _, k in _nearest_first([(-float(sims[k]), k) for k in near])][:near_most]
            cut.add(at)
        found = []
        for k in near:
            seen_from = order.get(pool.ids[k], len(recent))
            if seen_from < at and seen_from not in cut:
                continue
            theirs = numbers(pool.contents[k])
            if theirs and not quoted[at] & theirs:
                found.append((-float(sims[k]), int(k)))
        out += [(row["id"], pool.ids[k]) for _, k in _nearest_first(found)[:most]]
    return out


def random_store(
    rng: np.random.Generator, size: int
) -> tuple[list[dict[str, Any]], StatementPool, dict[str, Statement]]:
    """Rows around a few centres (some copies, so cosines tie), quoting 0-2 of a few numbers;
    a random part of them recent, and statements with tied trusts and times."""
    centres = rng.standard_normal((3, 8))
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for i in range(size):
        vec = centres[rng.integers(3)] + 0.15 * rng.standard_normal(8) * (rng.random() < 0.8)
        said = " ".join(str(n) for n in rng.choice([10, 20, 30, 45], rng.integers(3)))
        rows.append(
            {
                "id": f"m{i:03d}",
                "content": f"timeout {said}",
                "embedding": vec.astype(np.float32),
                "created_at": now - timedelta(days=int(rng.integers(4))),
            }
        )
    pool = StatementPool(
        [r["id"] for r in rows],
        [r["content"] for r in rows],
        unit_rows(np.stack([r["embedding"] for r in rows])),
        ["agent_inferred"] * size,
        [r["created_at"] for r in rows],
    )
    statements = {
        r["id"]: Statement(r["id"], float(rng.choice([0.8, 1.0])), r["created_at"]) for r in rows
    }
    recent = [r for r in rows if rng.random() < 0.6]
    return recent, pool, statements


@pytest.mark.parametrize("crowded", [False, True])
def test_a_pass_within_its_budget_records_what_checking_every_row_did(
    monkeypatch: pytest.MonkeyPatch, crowded: bool
) -> None:
    # The budget changes which rows a pass checks, never what it finds among them: on stores
    # that fit it the pairs come in the same order, so `prevailing` (which takes the first of
    # a pair stated at the same time as the newer) settles every pair as it did.
    from octobrain.memory import conflicts

    near_most, most = (6, 3) if crowded else (NEAR_PER_ROW, conflicts.PAIRS_PER_ROW)
    monkeypatch.setattr(conflicts, "NEAR_PER_ROW", near_most)
    monkeypatch.setattr(conflicts, "PAIRS_PER_ROW", most)
    rng = np.random.default_rng(7)
    window = utcnow() - timedelta(days=2)
    for size in rng.integers(2, 50, size=60).tolist():
        recent, pool, statements = random_store(rng, size)
        before = every_row_pairs(recent, pool, 0.8, near_most, most)
        pairs, unchecked = conflicting_pairs(recent, pool, 0.8)
        assert (pairs, unchecked) == (before, 0)
        assert resolve(pairs, statements, set(), window) == resolve(
            before, statements, set(), window
        )


def test_copies_rounded_apart_by_the_matrix_product_are_taken_in_pool_order() -> None:
    # numpy 2.4 rounds a row's cosine with one of two identical statements to 0.98787105 and
    # with the other to 0.9878711 by the row's place in the product: still one cosine.
    found = [(-0.9, 1), (-0.98787105, 7), (-0.9878711, 3), (-0.95, 9), (-0.9878711 + TIE / 2, 5)]
    assert [k for _, k in _nearest_first(found)] == [3, 5, 7, 9, 1]


def test_a_pass_compares_a_bounded_number_of_pairs_newest_first() -> None:
    # 3,000 values of one setting, all recent: every row's 256 nearest conflict. Each row kept
    # 128 pairs: 384,000 at once (21,500 rows: 2.75 million, 23 s and 1.39 GB).
    rng = np.random.default_rng(3)
    now = utcnow()
    size = 3_000
    vectors = unit_rows((1 + 0.05 * rng.standard_normal((size, 16))).astype(np.float32))
    rows = [
        {
            "id": f"v{i}",
            "content": timeout(1000 + i),
            "embedding": vectors[i],
            "created_at": now - timedelta(minutes=size - i),
        }
        for i in range(size)
    ]
    pool = StatementPool(
        [r["id"] for r in rows],
        [r["content"] for r in rows],
        vectors,
        ["agent_inferred"] * size,
        [r["created_at"] for r in rows],
    )
    pairs, unchecked = conflicting_pairs(rows[::-1], pool, 0.8)  # the order read is no matter
    checked = size - unchecked
    assert checked == PAIRS_PER_PASS // NEAR_PER_ROW  # every row compared its 256 nearest
    assert len(pairs) <= checked * PAIRS_PER_ROW
    assert {a for a, _ in pairs} == {f"v{i}" for i in range(size - checked, size)}  # newest
    # A row left out is still paired with the rows checked, from their side.
    assert any(b == f"v{size - checked - 1}" for _, b in pairs)


def test_the_pass_reports_the_rows_its_budget_left_to_a_later_pass(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts

    brain = make_brain()
    now = utcnow()
    said = [add_at(brain, "Timeout", timeout(30 + i), now - timedelta(hours=i)) for i in range(6)]
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 10)  # two rows of 5 other statements
    report = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert report.unchecked == 4
    checked = {said[0].id, said[1].id}  # the newest
    assert report.disagreements and all(checked & set(pair) for pair in report.disagreements)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 30)
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 0


def test_successive_passes_check_every_row_of_a_burst_over_the_budget(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 24 guesses, each compared with the 24 other statements, 5 a pass: the passes before
    # checked the same 5 newest every time, and 19 guesses never met the user's value.
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 24)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 5 * 24)
    waiting = []
    for _ in range(math.ceil(24 / 5) + 1):
        waiting.append(brain.sleep_consolidate(threshold=0.7).unchecked)
    assert outranked(brain, told) == {g.id for g in guesses}
    assert waiting == [19, 14, 9, 4, 0, 0]  # the rows no pass has checked yet


def test_a_burst_deeper_than_the_window_is_checked_by_daily_passes(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 guesses within a day, 2 checked a pass, one pass a day: 10 passes' worth, and the
    # 7-day window lets the guesses go after 7. The 6 guesses left then were never checked:
    # the user's value never outranked them.
    from octobrain.memory import conflicts
    from octobrain.memory.sleep import sleep_pass

    brain = make_brain()
    told, guesses = burst(brain, 20)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 2 * 20)  # 20 other statements a row
    start, waiting = utcnow(), []
    for day in range(12):
        report = sleep_pass(
            brain.consolidator,
            brain.scope,
            threshold=0.7,
            min_size=3,
            max_age_days=7,
            now=start + timedelta(days=day),
        )
        waiting.append(report.unchecked)
    assert outranked(brain, told) == {g.id for g in guesses}
    assert waiting == [18, 16, 14, 12, 10, 8, 6, 4, 2, 0, 0, 0]


def test_a_burst_is_checked_by_the_lazy_passes_of_one_day(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A command an hour for a day, 20 guesses, 2 checked a pass: the pass was due once a day,
    # so 18 guesses waited for 9 more days. While rows are left it is due after an hour, and
    # once none are, after a day again: 10 passes, not 24.
    from octobrain.memory import conflicts, curation, sleep_startup

    brain = make_brain()
    told, guesses = burst(brain, 20)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 2 * 20)
    start, clock = utcnow(), [utcnow()]
    monkeypatch.setattr(sleep_startup, "utcnow", lambda: clock[0])
    monkeypatch.setattr(curation, "utcnow", lambda: clock[0])
    passes = []
    sleep_consolidate = Brain.sleep_consolidate

    def counted(self: Brain, **kwargs: Any) -> Any:
        report = sleep_consolidate(self, **kwargs, threshold=0.7)  # (the test embedder's)
        passes.append(report.unchecked)
        return report

    monkeypatch.setattr(Brain, "sleep_consolidate", counted)
    for hour in range(24):
        clock[0] = start + timedelta(hours=hour, minutes=1)
        sleep_startup._started.clear()  # a new process: one command
        thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
        if thread is not None:
            thread.join(timeout=60)
    assert passes == [18, 16, 14, 12, 10, 8, 6, 4, 2, 0]
    assert outranked(brain, told) == {g.id for g in guesses}


def test_a_row_written_between_passes_is_checked_by_the_next_pass_first(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)  # 3 rows of 12 others a pass
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    new = add_at(brain, "Timeout", timeout(99), utcnow(), source=Source.AGENT_INFERRED)
    # A dry run shows the next pass and moves nothing: twice the same.
    for _ in range(2):
        assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 8
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    # 2 rows of 13 others: the new row first, then on from where the last pass stopped.
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 8
    assert outranked(brain, told) == {new.id} | {g.id for g in guesses[:4]}
