"""Checking a snapshot's memory-mapped `rows.arrow` only where a read takes rows: the blocks
holding the bytes of the rows and columns it takes (a validity bit, an offset pair, a string's
bytes, a list's items), each verified once per process (`PageCheck`), so `memory get` and
`recent` check a few blocks, not the whole file (837 MB at 1M memories). What the mapped
buffers are found from (the IPC file's schema, batch headers and footer, outside every buffer)
is verified at open; a read of every row (`Corpus.rows`) verifies every block."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.memory.page_check import CheckedFile, PageCheck, distinct

_PADDING = 64  # (Arrow pads buffers to at most 64 bytes: a longer gap holds a header)
_Ints = npt.NDArray[np.int64]


class RowsCheck:
    """The block check of the rows of `table`, read from the file `mapped` maps (`check`)."""

    def __init__(self, check: PageCheck, table: pa.Table, mapped: pa.MemoryMappedFile) -> None:
        self.check, self.table = check, table
        self._column_blocks: dict[str, int] = {}
        mapped.seek(0)
        self._base, size = mapped.read_buffer(1).address, mapped.size()
        spans = sorted(self._spans(table.column_names))
        if any(start < 0 or stop > size for start, stop in spans):  # (not the file's bytes)
            check.everything()
            return
        ends = np.asarray([0, *(stop for _, stop in spans)], dtype=np.int64)
        starts = np.asarray([*(start for start, _ in spans), size], dtype=np.int64)
        headers = starts - ends > _PADDING
        check.ranges(ends[headers], starts[headers])
        self._chunk_starts = np.cumsum([0, *(len(c) for c in table.column(0).chunks)])

    @property
    def done(self) -> bool:
        """Whether every block is verified."""
        return self.check.done

    def rows(self, positions: Sequence[int] | _Ints, columns: Iterable[str]) -> None:
        """Verify the blocks the `columns` of the rows at `positions` are read from (positions
        past the table's rows are not the file's: rows read since, left alone)."""
        if self.check.done:
            return
        at = distinct(np.asarray(positions, dtype=np.int64), len(self.table))
        # A column read at no fewer rows than it has blocks is verified whole: its rows touch
        # most of its blocks then, and finding them row by row costs more than checking the
        # rest (a briefing's read of three columns of 100,000 rows: 46 → 7 ms of CPU, and
        # 43 → 0 ms each time again).
        names = list(columns)
        whole = [name for name in names if len(at) >= self._blocks(name)]
        self.columns(whole)
        columns = [name for name in names if name not in whole]
        chunk = np.searchsorted(self._chunk_starts, at, side="right") - 1
        chunks = distinct(chunk, len(self._chunk_starts)).tolist()
        todo = [
            (self.table.column(name).chunk(c), at[chunk == c] - self._chunk_starts[c])
            for name in columns
            for c in chunks
        ]
        spans: list[tuple[_Ints, _Ints]] = []
        while todo or spans:  # (a level at a time: offsets verified before they are read)
            later = [step for array, at in todo for step in self._array(array, at, spans)]
            if spans:
                starts, stops = zip(*spans, strict=True)
                self.check.ranges(np.concatenate(starts), np.concatenate(stops))
                spans = []
            todo = [nested for step in later for nested in step(spans)]

    def _blocks(self, name: str) -> int:
        """How many blocks the buffers of the column `name` lie in (counted once)."""
        if name not in self._column_blocks:
            block = self.check.block
            spans = self._spans([name])
            self._column_blocks[name] = sum((z - 1) // block - a // block + 1 for a, z in spans)
        return self._column_blocks[name]

    def columns(self, names: Iterable[str]) -> None:
        """Verify the blocks of every row of the columns `names` (their buffers, whole)."""
        spans = self._spans(names)
        if spans and not self.check.done:
            starts, stops = zip(*spans, strict=True)
            self.check.ranges(np.asarray(starts, np.int64), np.asarray(stops, np.int64))

    def _spans(self, names: Iterable[str]) -> list[tuple[int, int]]:
        """The byte ranges in the file of the buffers of the columns `names` (start, stop)."""
        return [
            (b.address - self._base, b.address - self._base + b.size)
            for name in names
            for chunk in self.table.column(name).chunks
            for b in chunk.buffers()
            if b is not None and b.size
        ]

    def everything(self) -> None:
        """Verify every block not verified yet."""
        self.check.everything()

    def _span(
        self, spans: list[tuple[_Ints, _Ints]], buffer: pa.Buffer, start: _Ints, stop: _Ints
    ) -> None:
        shift = buffer.address - self._base
        spans.append((start + shift, stop + shift))

    def _array(
        self, array: pa.Array, at: _Ints, spans: list[tuple[_Ints, _Ints]]
    ) -> list[Callable[[list[tuple[_Ints, _Ints]]], list[tuple[pa.Array, _Ints]]]]:
        """Add to `spans` what reading the items `at` (sorted) of `array` reads first; return
        what reads the rest once those are verified (the bytes or items its offsets point at)."""
        if not len(at):
            return []
        kind, buffers, at = array.type, array.buffers(), at + array.offset
        if buffers[0] is not None:  # validity bits
            self._span(spans, buffers[0], at // 8, at // 8 + 1)
        large = pa.types.is_large_string(kind) or pa.types.is_large_list(kind)
        if large or pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_list(kind):
            offsets = np.int64 if large else np.int32
            width = np.dtype(offsets).itemsize
            self._span(spans, buffers[1], at * width, (at + 2) * width)
            return [lambda out: self._pointed(array, np.frombuffer(buffers[1], offsets), at, out)]
        if kind.num_buffers == 2 and kind.num_fields == 0:  # fixed width
            bits = kind.bit_width
            self._span(spans, buffers[1], at * bits // 8, ((at + 1) * bits + 7) // 8)
        else:  # (no other type is mirrored: every block, rather than a guess)
            self.check.everything()
        return []

    def _pointed(
        self,
        array: pa.Array,
        offsets: npt.NDArray[Any],
        at: _Ints,
        spans: list[tuple[_Ints, _Ints]],
    ) -> list[tuple[pa.Array, _Ints]]:
        """The bytes (added to `spans`) or the list items (returned) the offsets of `at` point
        at."""
        first, last = offsets[at].astype(np.int64), offsets[at + 1].astype(np.int64)
        if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            items = [np.arange(a, b) for a, b in zip(first, last, strict=True)]
            # (the values not sliced: the offsets index them as they are)
            return [(array.values, np.unique(np.concatenate([np.zeros(0, np.int64), *items])))]
        self._span(spans, array.buffers()[2], first, last)
        return []


def merged_rows(
    rows: pa.Table, check: PageCheck | None, positions: _Ints | None = None
) -> pa.Table:
    """`rows` with one chunk a column (for writing a snapshot), its first rows (those of the
    file `check` checks, which `rows` maps) taken from that file's bytes read and verified
    block by block (`CheckedFile`), never through the mapping: a file cut in place meanwhile
    killed the writing process with SIGBUS (it is `SnapshotDamaged` now). Read a few columns
    at a time, none more bytes than the largest column: the file is never held twice.
    `positions`: only the rows at these, in their order (taken group by group)."""
    at = None if positions is None else pa.array(positions, pa.int64())
    if check is None:
        return rows.combine_chunks() if at is None else rows.take(at)
    read = CheckedFile(check)
    source = pa.PythonFile(read, mode="r")

    def group(fields: list[int]) -> list[pa.Array]:  # (what it read dropped on return)
        only = pa.ipc.IpcReadOptions(included_fields=fields)
        old = pa.ipc.open_file(source, footer_offset=check.length, options=only).read_all()
        merged = []
        for got, i in zip(old.columns, fields, strict=True):
            chunks = [*got.chunks, *rows.column(i).slice(len(old)).chunks]
            array = chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
            merged.append(array if at is None else array.take(at))
        return merged

    try:
        columns = [array for fields in _groups(rows) for array in group(fields)]
    except OSError:
        if read.damage is not None:  # (not a failed read: named as the snapshot's damage)
            raise read.damage from None
        raise
    return pa.Table.from_arrays(columns, schema=rows.schema)


def _groups(rows: pa.Table) -> list[list[int]]:
    """The columns of `rows` in runs of adjacent ones, each run's first chunks (as mapped,
    their buffers' sizes only) no more bytes together than the largest one's."""
    sizes = [c.chunk(0).get_total_buffer_size() if c.num_chunks else 0 for c in rows.columns]
    runs: list[list[int]] = [[]]
    total = 0
    for i, size in enumerate(sizes):
        if runs[-1] and total + size > max(sizes):
            runs.append([])
            total = 0
        runs[-1].append(i)
        total += size
    return runs
