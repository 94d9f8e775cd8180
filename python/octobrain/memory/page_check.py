"""Checking a memory-mapped snapshot as it is read: each large file's blocks carry a CRC-32,
and a block is verified the first time a read covers it, so a process opening a snapshot pays
for the pages it reads, not for the whole file (`memory.snapshot`)."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from octobrain import _core

BLOCK = 1 << 16  # the unit of the large files' checksums (64 KiB: a scattered read checks little)
# Blocks read and summed at once (4 MiB, into one reused buffer): one `preadv` and one Rust call
# for a run of blocks, not a `pread` and a `zlib.crc32` per block (the whole vectors file is
# checked by every process that scans them all, `rows.arrow` by every one that reads every row).
RUN = 64


class SnapshotDamaged(ValueError):
    """What a snapshot was made from is not what was recorded: a block of one of its files
    failed its checksum as it was about to be used (through its mapping, read from the file
    by a merge, or kept for a newer snapshot), or the store's files changed under it."""


class PageCheck:
    """The per-block CRC-32 of one snapshot file, each block verified the first time a read
    covers it (read with `os.preadv`, `RUN` blocks at most into one buffer, so checking maps
    nothing into the process). The file is opened at once and kept open: a snapshot deleted
    or replaced meanwhile stays checkable, as its mapped pages stay readable."""

    def __init__(
        self, path: Path, crcs: list[int], block: int = BLOCK, size: int | None = None
    ) -> None:
        self.path, self.block = path, block
        self._fd = os.open(path, os.O_RDONLY)
        # Its size as its CRCs were taken (`size`, the manifest's), else as opened.
        self.length = os.fstat(self._fd).st_size if size is None else size
        self.crcs = np.asarray(crcs, dtype=np.int64)
        self.ok = np.zeros(len(crcs), dtype=bool)
        self.done = not len(crcs)
        self._lock = threading.Lock()

    @property
    def opened(self) -> str:
        """A path that opens the file it checks as it was opened (its descriptor's, `/dev/fd/N`),
        even once another process's newer snapshot has removed this one's directory."""
        return f"/dev/fd/{self._fd}"

    @property
    def size(self) -> int:
        """The size of the file it checks (the one opened, even if since replaced)."""
        return os.fstat(self._fd).st_size

    def ranges(
        self,
        starts: npt.NDArray[np.int64],
        stops: npt.NDArray[np.int64],
        mapped: memoryview | None = None,
    ) -> None:
        """Verify the blocks covering the byte ranges [starts[i], stops[i]), summed from
        `mapped` (the whole file, mapped) when given, else read."""
        if self.done or not len(starts):
            return
        keep = stops > starts
        first, last = starts[keep] // self.block, (stops[keep] - 1) // self.block
        if not len(first):
            return
        blocks = distinct(_covered(first, last), len(self.ok))
        todo = blocks[~self.ok[blocks]]
        if not len(todo):
            return
        with self._lock:
            buffer = None if mapped is not None else _buffer(len(todo), self.block)
            for run, count in _runs(todo[~self.ok[todo]]):
                self._checked(run, count, buffer, mapped)
            self.done = bool(self.ok.all())

    def read(self, start: int, size: int) -> memoryview:
        """The file's bytes [start, start + size) (as far as its end as opened), read (not
        mapped: a file cut in place meanwhile is no SIGBUS) with the whole blocks they lie
        in, each verified first (`SnapshotDamaged`), `RUN` blocks a read."""
        size = max(0, min(size, self.length - start))
        if not size:
            return memoryview(b"")
        first, last = start // self.block, (start + size - 1) // self.block
        # (not a bytearray: zeroed, and mapped afresh each time, it cost 60 ms for 66 MB)
        span = np.empty((last + 1 - first) * self.block, dtype=np.uint8).data
        with self._lock:
            for run in range(first, last + 1, RUN):
                at = (run - first) * self.block
                self._checked(run, min(RUN, last + 1 - run), span[at:], None)
            self.done = bool(self.ok.all())
        at = start - first * self.block
        return span[at : at + size]

    def _checked(
        self, run: int, count: int, buffer: memoryview | None, mapped: memoryview | None
    ) -> memoryview:
        """The `count` blocks from block `run`, read into `buffer` (else taken from `mapped`),
        each verified against its CRC (`SnapshotDamaged`) and marked verified."""
        if mapped is None:
            assert buffer is not None
            got = os.preadv(self._fd, [buffer[: count * self.block]], run * self.block)
            data = buffer[:got]
        else:
            data = mapped[run * self.block : (run + count) * self.block]
        sums = sums_of(data, self.block)
        wrong = np.flatnonzero(sums != self.crcs[run : run + len(sums)])
        if len(sums) < count:  # (a file cut short: its missing blocks fail)
            wrong = np.append(wrong, len(sums))
        if len(wrong):
            b = run + int(wrong[0])
            raise SnapshotDamaged(f"{self.path.name} fails its checksum at block {b}")
        self.ok[run : run + count] = True
        return data

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.close(self._fd)

    def everything(self, mapped: memoryview | None = None) -> None:
        """Verify every block not verified yet (through `mapped`, as `ranges`)."""
        n = len(self.ok)
        whole = np.zeros(1, dtype=np.int64), np.full(1, n * self.block, dtype=np.int64)
        self.ranges(*whole, mapped)


class CheckedFile(io.RawIOBase):
    """The file a `PageCheck` checks, read-only, each read verified as `PageCheck.read`: for
    pyarrow's readers (`pa.PythonFile`), which read only the byte ranges they need. They
    raise the `SnapshotDamaged` a read raised as an `OSError` of their own ("Failed to read
    message body"): it is kept as `damage`."""

    def __init__(self, check: PageCheck) -> None:
        super().__init__()
        self._check, self._at = check, 0
        self.damage: SnapshotDamaged | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._at, os.SEEK_END: self._check.length}
        self._at = base[whence] + offset
        return self._at

    def read(self, size: int | None = -1) -> memoryview:
        wanted = self._check.length - self._at if size is None or size < 0 else size
        try:
            data = self._check.read(self._at, wanted)
        except SnapshotDamaged as exc:
            self.damage = exc
            raise
        self._at += len(data)
        return data


def _buffer(blocks: int, block: int) -> memoryview:
    """A buffer for reading `blocks` blocks, `RUN` at most (reused run after run)."""
    return memoryview(bytearray(min(blocks, RUN) * block))


def distinct(values: npt.NDArray[np.int64], below: int) -> npt.NDArray[np.int64]:
    """The distinct `values` (≥ 0) less than `below`, sorted; many are marked in a mask:
    numpy's `unique` hashes them (2.x), 23 ms for the 100,000 positions of a briefing."""
    if len(values) * 64 < below:  # (a few: fewer than the mask's bytes)
        found: npt.NDArray[np.int64] = np.unique(values[values < below])
        return found
    marked = np.zeros(below, dtype=bool)
    marked[values[values < below]] = True
    return np.flatnonzero(marked)


def _covered(first: npt.NDArray[np.int64], last: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Every block from `first[i]` to `last[i]` (inclusive) of each range, in a few array
    operations: a `np.arange` per range took a briefing of 10,000 memories 30-50 ms (~23,000
    vector and string rows read across a block boundary)."""
    counts = last - first + 1
    if int(counts.max()) == 1:
        return first
    within = np.arange(int(counts.sum()), dtype=np.int64)  # (each range's from 0, below)
    within -= np.repeat(np.cumsum(counts) - counts, counts)
    covered: npt.NDArray[np.int64] = np.repeat(first, counts) + within
    return covered


def _runs(blocks: npt.NDArray[np.int64]) -> Iterator[tuple[int, int]]:
    """(first block, count) of each run of consecutive `blocks` (sorted), at most `RUN` long."""
    if not len(blocks):
        return
    breaks = np.flatnonzero(np.diff(blocks) != 1) + 1
    for run in np.split(blocks, breaks):
        for i in range(0, len(run), RUN):
            yield int(run[i]), len(run[i : i + RUN])


def sums_of(data: bytes | memoryview, block: int) -> npt.NDArray[np.int64]:
    """The CRC-32 (zlib's) of each `block` bytes of `data`, the last one possibly shorter."""
    return _core.block_crcs(np.frombuffer(data, dtype=np.uint8), block).astype(np.int64)


def file_crc(path: Path, chunk: int = BLOCK * RUN) -> int:
    """The CRC-32 of a whole file, as `zlib.crc32` of its bytes, streamed (so verifying a
    memory-mapped file does not map it)."""
    crc = 0
    with path.open("rb") as f:
        while data := f.read(chunk):
            crc = _core.crc32(np.frombuffer(data, dtype=np.uint8), crc)
    return crc


def block_crcs(path: Path, block: int = BLOCK) -> list[int]:
    """The CRC-32 of each `block` bytes of the file at `path`."""
    return file_sums(path, block)[1]


def file_sums(path: Path, block: int = BLOCK) -> tuple[int, list[int]]:
    """The CRC-32 of the file at `path` (as `file_crc`) and of each `block` bytes of it, in
    one read (a snapshot writer read each large file twice, once for each)."""
    out: list[int] = []
    crc = 0
    with path.open("rb") as f:
        while data := f.read(block * RUN):
            out.extend(sums_of(data, block).tolist())
            crc = _core.crc32(np.frombuffer(data, dtype=np.uint8), crc)
    return crc, out
