"""`VectorBlocks`: row vectors held as a few blocks, the first often memory-mapped.

The mirror's embeddings start as one block (a snapshot's memory-mapped ``vectors.npy``, or what
a first load read) and grow by the rows later commits add. Appending to one array would copy
the whole, memory-mapped matrix into RAM; blocks keep the mapped part untouched, gather rows by
position, and merge only the small blocks appended after it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

_MAX_TAIL_BLOCKS = 8
_PREAD_SHARE = 64  # rows read with pread when fewer than 1/64 of a mapped block's


class VectorBlocks:
    """Float32 rows of width `dim`, addressed by position across blocks."""

    def __init__(
        self,
        dim: int,
        first: npt.NDArray[np.float32] | None = None,
        check: Callable[[npt.NDArray[np.int64] | None], None] | None = None,
    ) -> None:
        """`check(positions)` runs before rows of `first` are read (None: all of them); a
        snapshot's memory-mapped vectors are verified that way as they are read."""
        self.dim = dim
        self._check = check
        # A mapped first block's file, kept open for `pread` (readable even once deleted).
        filename = getattr(first, "filename", None)
        self._fd = os.open(filename, os.O_RDONLY) if filename else None
        base = np.zeros((0, dim), dtype=np.float32) if first is None else first
        self._blocks: list[npt.NDArray[np.float32]] = [base]
        self._starts = [0]
        self._len = len(base)

    def append(self, block: npt.NDArray[np.float32]) -> None:
        """Add rows after the last position."""
        if not len(block):
            return
        if self._len == 0:  # the first rows become the first block (never re-merged)
            self._blocks, self._len = [np.ascontiguousarray(block, dtype=np.float32)], len(block)
            self._check = None
            if self._fd is not None:  # (an empty mapped block: nothing to read from it)
                os.close(self._fd)
                self._fd = None
            return
        self._blocks.append(np.ascontiguousarray(block, dtype=np.float32))
        self._starts.append(self._len)
        self._len += len(block)
        if len(self._blocks) > 1 + _MAX_TAIL_BLOCKS:  # merge the tail, never the first block
            tail = np.concatenate(self._blocks[1:])
            self._blocks, self._starts = [self._blocks[0], tail], [0, self._starts[1]]

    def _checked(self, positions: npt.NDArray[np.int64] | None) -> None:
        if self._check is not None:
            if positions is None:
                self._check(None)
                self._check = None  # every row verified
            else:
                self._check(positions[positions < len(self._blocks[0])])

    @property
    def first(self) -> npt.NDArray[np.float32]:
        """The first block (memory-mapped when it came from a snapshot), verified."""
        self._checked(None)
        return self._blocks[0]

    def blocks(self) -> list[npt.NDArray[np.float32]]:
        """The blocks as they are now (none is changed later: appends add new ones).
        Unverified: a snapshot writer checks its source first."""
        return list(self._blocks)

    def dense(self) -> npt.NDArray[np.float32]:
        """All rows as one array (a copy when there are several blocks)."""
        self._checked(None)
        if len(self._blocks) == 1:
            return self._blocks[0]
        return np.concatenate(self._blocks)

    def __len__(self) -> int:
        return self._len

    def __getitem__(
        self, positions: Sequence[int] | npt.NDArray[np.integer]
    ) -> npt.NDArray[np.float32]:
        """The rows at `positions`, in that order."""
        pos = np.asarray(positions, dtype=np.int64)
        self._checked(pos)
        if len(self._blocks) == 1:
            return self._gather(self._blocks[0], pos)
        out = np.empty((len(pos), self.dim), dtype=np.float32)
        block_of = np.searchsorted(np.asarray(self._starts), pos, side="right") - 1
        for b in np.unique(block_of):
            sel = block_of == b
            out[sel] = self._gather(self._blocks[b], pos[sel] - self._starts[b])
        return out

    def _gather(
        self, block: npt.NDArray[np.float32], pos: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        """Rows of `block`. A few rows of a memory-mapped file are read with `os.pread`:
        a page fault would map the whole large folio the page cache holds around each row
        (about a megabyte apiece on Linux 6.x), so a few hundred scattered rows per query
        would make most of the file resident in this process."""
        fd = self._fd if block is self._blocks[0] else None
        if fd is None or len(pos) * _PREAD_SHARE > len(block) or not len(pos):
            return np.asarray(block[pos])
        row = self.dim * 4
        base = int(getattr(block, "offset", 0))
        out = np.empty((len(pos), self.dim), dtype=np.float32)
        view = out.data.cast("B")
        for i, p in enumerate(pos.tolist()):
            if not 0 <= p < len(block):
                raise IndexError(f"position {p} is out of range")
            if os.preadv(fd, [view[i * row : (i + 1) * row]], base + p * row) != row:
                raise OSError("short read of a snapshot's vectors")
        return out

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def cosines(self, vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Every row's dot product with `vector` (one cosine per row for unit rows)."""
        from octobrain.kernels.hybrid import cosines

        self._checked(None)
        parts = [cosines(block, vector) for block in self._blocks]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def take(self, positions: npt.NDArray[np.int64]) -> VectorBlocks:
        """A new single-block set of the rows at `positions` (for a compaction)."""
        return VectorBlocks(self.dim, self[positions])
