"""`VectorBlocks`: rows appended after a (memory-mapped) first block read back by position."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from octobrain.kernels.vectors import VectorBlocks


def test_rows_across_a_mapped_block_and_appended_ones_read_back_by_position(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(3)
    rows = rng.random((40, 8), dtype=np.float32)
    np.save(tmp_path / "v.npy", rows[:10])
    blocks = VectorBlocks(8, np.load(tmp_path / "v.npy", mmap_mode="r"))
    for start in range(10, 40, 3):  # more appends than tail blocks are kept: they merge
        blocks.append(rows[start : start + 3])
    assert len(blocks) == 40
    order = [39, 0, 12, 9, 10, 25, 25]
    assert np.array_equal(blocks[order], rows[order])
    assert isinstance(blocks.first, np.memmap)  # the mapped block is never copied
    query = rng.random(8, dtype=np.float32)
    assert np.allclose(blocks.cosines(query), rows @ query, atol=1e-5)
    assert np.array_equal(blocks.dense(), rows)
    assert np.array_equal(blocks.take(np.array([5, 30]))[[0, 1]], rows[[5, 30]])


def test_a_few_rows_of_a_mapped_block_are_read_without_mapping_them(tmp_path: Path) -> None:
    import pytest

    rows = np.random.default_rng(4).random((2000, 16), dtype=np.float32)
    np.save(tmp_path / "v.npy", rows)
    checked: list[list[int]] = []
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    blocks = VectorBlocks(16, mapped, lambda pos: checked.append([] if pos is None else list(pos)))
    order = [1999, 0, 7, 7, 1024]
    assert np.array_equal(blocks[order], rows[order])
    assert checked == [order]  # verified before they were read
    blocks.append(rows[:3])
    assert np.array_equal(blocks[[2001, 5, 1999]], rows[[1, 5, 1999]])
    with pytest.raises(IndexError):
        VectorBlocks(16, mapped)[[2000]]
