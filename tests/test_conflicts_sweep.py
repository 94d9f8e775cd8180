"""The conflict check's sweep record: it survives rows leaving, imports and restores, reaches every
row in as few passes as the budget allows, and one that cannot be kept or read fails no pass."""

from __future__ import annotations

import io
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.memory.brain import Brain
from octobrain.memory.sweep import Sweep
from octobrain.times import utcnow
from tests.conflicts_support import FILLER, burst, outranked, timeout
from tests.consolidation_support import MakeBrain, add_at
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared


def test_the_sweep_survives_rows_leaving_and_a_damaged_record(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts, sweep

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    # The row the last pass stopped at, and the next one, forgotten: the next pass goes on.
    assert brain.forget([guesses[2].id, guesses[3].id], confirm=True).deleted == 2
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 5  # 8 not reached, 3 a pass
    assert outranked(brain, told) >= {g.id for g in guesses[4:7]}
    # A record it cannot read (or of another format) starts over from the newest.
    name = sweep.record_name(brain.scope)
    brain.store.location.write_json(name, {"format": 0, "newest": "x"})
    report = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert report.unchecked == 7 and report.disagreements
    (brain.store.location.path / "_octobrain" / name).write_text("{not json")
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 7


def test_an_imported_row_dated_among_the_rows_checked_is_checked_too(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A guess imported after a pass, dated between the rows that pass checked, was taken for
    # one reached: not counted, and checked only when the check came round to it again.
    from octobrain.memory import conflicts
    from octobrain.memory.export import export_jsonl
    from octobrain.memory.transfer import import_jsonl

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9  # the 3 newest checked
    elsewhere = Brain(brain.scope, config=brain.config, embedder=brain.embedder, uri=tmp_path / "b")
    late = add_at(elsewhere, "Timeout", timeout(77), utcnow() - timedelta(minutes=90))
    out = io.StringIO()
    export_jsonl(elsewhere, out, embeddings=True)
    assert import_jsonl(brain, out.getvalue().splitlines()).imported == 1
    # 2 rows of 13 others a pass: the imported row first, then on below: 10 - 2 left.
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 8
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 8
    assert outranked(brain, told) == {late.id} | {g.id for g in guesses[:4]}


def test_an_import_during_a_pass_is_kept_in_the_record_that_pass_writes(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `memory import` starts the day's lazy pass as it starts: a pass that read the record
    # before the import marked its rows must not write over that mark.
    from octobrain.memory import conflicts
    from octobrain.memory.export import export_jsonl
    from octobrain.memory.transfer import import_jsonl

    brain = make_brain()
    told, _ = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    elsewhere = Brain(brain.scope, config=brain.config, embedder=brain.embedder, uri=tmp_path / "b")
    late = add_at(elsewhere, "Timeout", timeout(77), utcnow() - timedelta(minutes=90))
    out = io.StringIO()
    export_jsonl(elsewhere, out, embeddings=True)
    search = conflicts.conflicting_pairs

    def importing(*args: Any, **kwargs: Any) -> Any:
        import_jsonl(brain, out.getvalue().splitlines())  # while the pass runs
        return search(*args, **kwargs)

    monkeypatch.setattr(conflicts, "conflicting_pairs", importing)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6  # (it read the rows before)
    monkeypatch.setattr(conflicts, "conflicting_pairs", search)
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 5  # 7 - 2
    brain.sleep_consolidate(threshold=0.7)
    assert late.id in outranked(brain, told)


def test_a_restore_starts_the_check_over_from_the_newest(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restore took back the conflicts a pass recorded, not where the pass stopped: the next
    # passes went on below, and the 3 newest guesses stayed unordered until a round came back.
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    version = brain.history(1)[0].version
    add_at(brain, *FILLER[0], utcnow())  # a later version: the edges after it go back
    brain.sleep_consolidate(threshold=0.7)
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    brain.restore(version, confirm=True)
    assert outranked(brain, told) == set()
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    # Its record written under the restore's mark, the pass after goes on from there.
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6
    assert outranked(brain, told) == {g.id for g in guesses[:6]}


def test_a_pass_a_restore_overtook_keeps_no_record(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restore made while a pass ran (it took the edges back): the pass's record, read
    # before it, would say its rows were reached.
    from octobrain.memory import conflicts, sweep

    brain = make_brain()
    burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    search = conflicts.conflicting_pairs

    def restored(*args: Any, **kwargs: Any) -> Any:
        sweep.start_over(brain.store.location)  # what a restore does, once its tables are back
        return search(*args, **kwargs)

    monkeypatch.setattr(conflicts, "conflicting_pairs", restored)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6
    assert sweep.load(brain.store.location, brain.scope) == sweep.Sweep()


def test_the_sweep_reaches_every_row_in_as_few_passes_as_the_budget_allows() -> None:
    # Random bursts and rows checked a pass, rows written and forgotten between passes: the
    # count is always the rows no pass has reached; a row written since the last pass comes
    # first; and every pass but the last reaches as many new rows as it checks.
    rng = np.random.default_rng(11)
    for _ in range(200):
        size, per = int(rng.integers(1, 60)), int(rng.integers(1, 12))
        keys = {at: (int(rng.integers(40)), f"r{at}") for at in range(size)}
        state, reached, passes = Sweep(), set(), 0
        while len(reached) < len(keys):
            if passes and rng.random() < 0.3:
                written = size + passes
                keys[written] = ((state.newest or (0, ""))[0] + 1, f"w{written}")
                assert state.order(keys)[0] == written
            if passes and rng.random() < 0.3:
                del keys[int(rng.choice(list(keys)))]
            order = state.order(keys)
            assert sorted(order) == sorted(keys)
            reached |= {keys[at] for at in order[:per]}
            state, waiting = state.after(keys, order, min(per, len(order)))
            assert waiting == sum(k not in reached for k in keys.values())
            assert Sweep.from_record(state.to_record("s"), "s") == state
            passes += 1
        assert passes <= math.ceil(len(reached) / per)


def test_reopening_keys_leaves_them_and_every_row_unreached_before_in_a_gap() -> None:
    # An import's range joined with the gaps a sweep holds: nothing unreached is lost, the
    # range is unreached, and the record stays one a pass reads back.
    rng = np.random.default_rng(5)
    for _ in range(300):
        keys = {at: (int(rng.integers(60)), f"r{at}") for at in range(int(rng.integers(1, 50)))}
        state = Sweep()
        for _ in range(int(rng.integers(1, 6))):
            order = state.order(keys)
            state, _ = state.after(keys, order, int(rng.integers(1, len(order) + 1)))
        assert state.newest is not None
        low, high = sorted(int(v) for v in rng.integers(0, 60, size=2))
        opened = state.reopened((low, "a"), (high, "z"))
        assert Sweep.from_record(opened.to_record("s"), "s") == opened
        probe = [(m, f"p{m}") for m in range(60)] + list(keys.values())
        assert all(opened.holds(k) for k in probe if state.holds(k))
        assert all(opened.holds(k) for k in probe if low <= k[0] <= high and k < state.newest)


def test_a_sweep_that_cannot_be_kept_fails_no_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A store whose `_octobrain/` this process may not write (or a full disk): the pass's
    # conflicts are recorded already; losing where it stopped only repeats work.
    from octobrain.memory import sweep
    from octobrain.store.location import StoreLocation

    location = StoreLocation(str(tmp_path / "db"))
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "_octobrain").write_text("not a directory")
    with caplog.at_level("WARNING"):
        sweep.save(location, "github.com/acme/api", sweep.Sweep(newest=(1, "a")))
    assert "where this pass stopped was not kept" in caplog.text
    assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()


def test_a_sweep_that_cannot_be_read_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An object store's own error (unreachable, access denied) or a record nested past
    # reading failed the whole sleep pass, while one that could not be written did not.
    from octobrain.memory import sweep
    from octobrain.store.location import StoreLocation

    class BucketError(Exception):
        pass

    def unreachable(self: StoreLocation, name: str) -> None:
        raise BucketError("the bucket did not answer")

    location = StoreLocation(str(tmp_path / "db"))
    monkeypatch.setattr(StoreLocation, "read_json", unreachable)
    with caplog.at_level("WARNING"):
        assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()
    assert "could not be read (the bucket did not answer)" in caplog.text

    def nested(self: StoreLocation, name: str) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(StoreLocation, "read_json", nested)
    assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()
