"""`RowsCheck`: only the blocks of a mapped Arrow file that the rows a read takes lie in are
verified, offsets before the bytes they point at, and a damaged one is never read past."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from octobrain.memory.page_check import PageCheck, SnapshotDamaged, block_crcs
from octobrain.memory.rows_check import RowsCheck, merged_rows

BLOCK = 512


def _written(path: Path) -> pa.Table:
    table = pa.table(
        {
            "id": [f"id-{i:04d}" for i in range(400)],
            "tags": [[f"tagmark{i:04d}", "x" * 20] for i in range(400)],
            "importance": [i / 400 for i in range(400)],
        }
    )
    with path.open("wb") as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table)
    return table


def _opened(path: Path, crcs: list[int]) -> RowsCheck:
    mapped = pa.memory_map(str(path))
    return RowsCheck(PageCheck(path, crcs, BLOCK), pa.ipc.open_file(mapped).read_all(), mapped)


def test_only_the_blocks_a_read_takes_are_verified(tmp_path: Path) -> None:
    path = tmp_path / "rows.arrow"
    _written(path)
    crcs = block_crcs(path, BLOCK)
    data = bytearray(path.read_bytes())
    hit = data.index(b"tagmark0300")  # a list item's bytes, two levels below the row
    data[hit + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    check = _opened(path, crcs)
    check.rows([10], ["id", "tags", "importance"])  # sound blocks: read
    assert 0 < check.check.ok.sum() < len(crcs) / 2
    check.rows([300], ["id", "importance"])  # the damaged block holds none of these
    with pytest.raises(SnapshotDamaged, match=f"block {hit // BLOCK}"):
        check.rows([300], ["tags"])
    with pytest.raises(SnapshotDamaged):
        check.everything()


def test_damaged_headers_are_found_at_open(tmp_path: Path) -> None:
    path = tmp_path / "rows.arrow"
    _written(path)
    crcs = block_crcs(path, BLOCK)
    data = bytearray(path.read_bytes())
    data[data.index(b"importance") + 3] ^= 0x01  # the schema at the head: still parses
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotDamaged, match="block 0"):
        _opened(path, crcs)


def test_the_rows_a_mirror_keeps_are_read_verified_and_damage_is_named(tmp_path: Path) -> None:
    # A mirror dropping its deleted rows (and a snapshot's writer) reads the snapshot's rows
    # from bytes it checked, not through the mapping; damage in them is the snapshot's
    # (`SnapshotDamaged`, which pyarrow's reader raised as an OSError of its own).
    path = tmp_path / "rows.arrow"
    table = _written(path)
    crcs = block_crcs(path, BLOCK)
    held = pa.concat_tables([pa.ipc.open_file(pa.memory_map(str(path))).read_all(), table[:5]])
    kept = [0, 17, 399, 400, 404]  # (the last two: rows appended since the snapshot)
    got = merged_rows(held, PageCheck(path, crcs, BLOCK), kept)
    assert got.equals(held.take(kept))
    data = bytearray(path.read_bytes())
    hit = data.index(b"tagmark0300")
    data[hit + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotDamaged, match=f"block {hit // BLOCK}"):
        merged_rows(held, PageCheck(path, crcs, BLOCK), kept)


def test_a_column_read_at_many_rows_is_verified_whole_and_the_others_are_not(
    tmp_path: Path,
) -> None:
    # A read at no fewer rows than a column has blocks checks the column's buffers whole
    # (a briefing reads three columns of every row): damage in that column is found, and the
    # blocks of the columns it does not read stay unchecked.
    path = tmp_path / "rows.arrow"
    _written(path)
    crcs = block_crcs(path, BLOCK)
    data = bytearray(path.read_bytes())
    hit = data.index(b"id-0301")
    data[hit + 4] ^= 0xFF
    path.write_bytes(bytes(data))
    check = _opened(path, crcs)
    check.rows(range(400), ["importance"])
    assert 0 < check.check.ok.sum() < len(crcs) / 2  # (the tags are most of the file)
    with pytest.raises(SnapshotDamaged, match=f"block {hit // BLOCK}"):
        check.rows(range(0, 400, 2), ["id"])
