"""A snapshot's block checksums, summed in Rust (`page_check`), are `zlib.crc32` of each block
(the readable reference, and what every snapshot written before holds), and a page check that
reads a run of blocks at once still names the first damaged block and a file cut short."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain import _core
from octobrain.memory import page_check
from octobrain.memory.page_check import PageCheck, SnapshotDamaged
from octobrain.memory.snapshot_reads import tallied
from octobrain.store.schema import DAMAGED_TITLE


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 700), st.integers(0, 2**32 - 1))
def test_block_and_running_sums_are_zlib_s(data: bytes, block: int, start: int) -> None:
    view = np.frombuffer(data, dtype=np.uint8)
    expected = [zlib.crc32(data[i : i + block]) for i in range(0, len(data), block)]
    assert _core.block_crcs(view, block).tolist() == expected
    assert _core.crc32(view, start) == zlib.crc32(data, start)
    with pytest.raises(ValueError, match="block"):
        _core.block_crcs(view, 0)


def test_a_file_s_sums_are_zlib_s(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = np.random.default_rng(3).bytes(5 * 1024 + 17)
    path.write_bytes(data)
    assert page_check.block_crcs(path, 1024) == [
        zlib.crc32(data[i : i + 1024]) for i in range(0, len(data), 1024)
    ]
    assert page_check.file_crc(path, chunk=1000) == zlib.crc32(data)
    (tmp_path / "empty").write_bytes(b"")
    assert page_check.file_crc(tmp_path / "empty") == 0


@pytest.mark.parametrize("damaged", [0, 5, 9])
def test_a_run_of_blocks_names_its_first_damaged_block(tmp_path: Path, damaged: int) -> None:
    path = tmp_path / "f"
    data = bytearray(np.random.default_rng(5).bytes(10 * 64 + 30))
    path.write_bytes(data)
    sums = page_check.block_crcs(path, 64)
    data[damaged * 64 + 3] ^= 1
    path.write_bytes(data)
    check = PageCheck(path, sums, block=64)
    check.ranges(np.array([0]), np.array([damaged * 64]))  # the blocks before it are sound
    with pytest.raises(SnapshotDamaged, match=f"at block {damaged}$"):
        check.everything()
    assert check.ok.tolist() == [True] * damaged + [False] * (11 - damaged)


def test_a_file_cut_short_fails_at_its_first_missing_block(tmp_path: Path) -> None:
    path = tmp_path / "f"
    data = np.random.default_rng(7).bytes(6 * 64)
    path.write_bytes(data)
    sums = page_check.block_crcs(path, 64)
    path.write_bytes(data[: 4 * 64])
    with pytest.raises(SnapshotDamaged, match="at block 4$"):
        PageCheck(path, sums, block=64).everything()


def test_counts_by_value_are_the_rows_python_counts() -> None:
    values = ["b", "a", None, "b", "c", "a", "b"]
    rows = pa.table({"k": pa.chunked_array([values[:3], values[3:]])})
    # the most first, ties by name (`memory stats` lists them so)
    assert list(tallied(rows, "k", set()).items()) == [("b", 3), ("a", 2), ("None", 1), ("c", 1)]
    # a damaged row counts as damaged, never as what it reads as
    damaged = [(DAMAGED_TITLE, 2), ("a", 2), ("b", 2), ("None", 1)]
    assert list(tallied(rows, "k", {0, 4}).items()) == damaged


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1300), st.integers(0, 400)), max_size=40))
def test_a_read_verifies_exactly_the_blocks_its_ranges_cover(
    tmp_path_factory: pytest.TempPathFactory, spans: list[tuple[int, int]]
) -> None:
    path = tmp_path_factory.mktemp("covered") / "f"
    path.write_bytes(np.random.default_rng(11).bytes(20 * 64 + 9))
    check = PageCheck(path, page_check.block_crcs(path, 64), block=64)
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    check.ranges(starts, starts + np.array([n for _, n in spans], dtype=np.int64))
    covered = {b for s, n in spans for b in range(s // 64, (s + n - 1) // 64 + 1) if n}
    assert set(np.flatnonzero(check.ok).tolist()) == {b for b in covered if b < 21}
