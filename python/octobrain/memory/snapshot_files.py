"""The large files of a snapshot being written (`memory.snapshot`): its vectors, linked or
copied from an older snapshot's file where they can be, and what else it keeps of that
snapshot's files, never read through their mappings (a file cut in place meanwhile killed the
writing process with SIGBUS, or was written short): read and verified block by block
(`PageCheck.read`), or copied in the kernel and their blocks' checksums compared with the
older ones' (`SnapshotDamaged`); and every file's checksums, each file read once."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from octobrain import _core
from octobrain.files import open_regular
from octobrain.memory.page_check import BLOCK, RUN, PageCheck, SnapshotDamaged, file_crc, file_sums


def write_vectors(
    path: Path, blocks: list[npt.NDArray[np.float32]], dim: int, older: PageCheck | None
) -> range:
    """The vectors as ``.npy``; the blocks of it copied unread from the older snapshot's
    ``vectors.npy`` (`older` checks it), at the offsets they have there, which the caller
    compares with `older`'s checksums (`unchanged`) once it sums the file written. When they
    are one whole ``.npy`` file already (mapped: an older snapshot's, or a build's scratch
    file), that file is linked (or copied from file to file); else the older snapshot's rows
    before those added since are copied (`_copy_older`), never read through the mapping."""
    linked = None if len(blocks) > 1 or older is None else link_older(path, blocks[0], older)
    if linked is not None:
        return linked
    source = _whole_file(blocks)
    if source is not None:  # (a build's scratch file)
        _link(source, path)
        return range(0)
    kept = range(0)
    with path.open("wb") as f:
        rows = sum(len(b) for b in blocks)
        header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
        np.lib.format.write_array_header_1_0(f, header)
        if older is not None and _maps_all(blocks[0], older):
            kept = _copy_older(older, blocks[0], f)
            blocks = blocks[1:]
        elif _copied(_whole_file(blocks[:1]), f, _offset(blocks[0]), blocks[0].nbytes):
            blocks = blocks[1:]  # (a build's scratch file, from file to file)
        for block in blocks:
            f.write(np.ascontiguousarray(block, dtype="<f4").data.cast("B"))
        f.flush()
        os.fsync(f.fileno())
    return kept


def link_older(path: Path, array: npt.NDArray[Any], older: PageCheck) -> range | None:
    """Link (or copy from file to file) the older snapshot's file `older` checks to `path`
    when `array` maps all of it (an index's postings, vectors, unchanged since): never read
    through the mapping. Every block of it, which the caller compares with `older`'s
    checksums once it sums the file (a file cut or changed in place meanwhile is damage, not
    a new snapshot holding it under fresh checksums); None (nothing written) when it is not."""
    if not _maps_all(array, older):
        return None
    _link(older.path, path)
    return range(len(older.crcs))


def unchanged(name: str, written: list[int], older: PageCheck, kept: range) -> None:
    """Raise `SnapshotDamaged` at the first of the `kept` blocks of the file written (its
    block checksums `written`) whose checksum is not the one `older` holds for it: a block
    copied unread from the older snapshot's file that was not what that snapshot wrote."""
    if not len(kept):
        return
    sums = np.full(len(kept), -1, dtype=np.int64)
    got = np.asarray(written[kept.start : kept.stop], dtype=np.int64)
    sums[: len(got)] = got
    wrong = np.flatnonzero(sums != older.crcs[kept.start : kept.stop])
    if len(wrong):
        raise SnapshotDamaged(f"{name} fails its checksum at block {kept.start + int(wrong[0])}")


def _mapping(array: npt.NDArray[Any]) -> Any:
    """The `np.memmap` `array` is (or is a view of, as `np.asarray` of one), else None."""
    return array if isinstance(array, np.memmap) else getattr(array, "base", None)


def _offset(array: npt.NDArray[Any]) -> int:
    """Where in its file the `np.memmap` `array` is starts (-1: not one)."""
    return int(getattr(array, "offset", -1))


def _maps_all(array: npt.NDArray[Any], older: PageCheck) -> bool:
    """Whether `array` maps the rest of the file `older` checks, from its start (as opened,
    whatever that file's size now: it may be cut), as one contiguous run of bytes."""
    mapped = _mapping(array)
    if not isinstance(mapped, np.memmap) or not array.flags.c_contiguous:
        return False
    if not mapped.filename or os.path.abspath(mapped.filename) != os.path.abspath(older.path):
        return False
    same = array.ctypes.data == mapped.ctypes.data and array.nbytes == mapped.nbytes
    same = same and (array.dtype, array.shape) == (mapped.dtype, mapped.shape)
    return same and int(mapped.offset) + mapped.nbytes == older.length


def _link(source: str | Path, path: Path) -> None:
    try:
        os.link(source, path)  # (its bytes were synced as that file was written)
    except OSError:
        shutil.copyfile(source, path)
        with path.open("rb+") as f:
            os.fsync(f.fileno())


def _whole_file(blocks: list[npt.NDArray[np.float32]]) -> str | None:
    """The file of `blocks` when they are one memory-mapped float32 ``.npy`` file, all of it
    (its header's shape is theirs); else None."""
    if len(blocks) != 1 or not isinstance(blocks[0], np.memmap):
        return None
    block = blocks[0]
    filename = getattr(block, "filename", None)
    if not filename or not block.flags.c_contiguous:
        return None
    try:
        with open(filename, "rb") as f:
            if np.lib.format.read_magic(f) != (1, 0):
                return None
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            header = f.tell()
            size = os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return None
    whole = shape == block.shape and not fortran and dtype == np.dtype("<f4")
    if not whole or block.offset != header or size != header + block.nbytes:
        return None
    return str(filename)


def _copy_older(older: PageCheck, block: npt.NDArray[np.float32], f: BinaryIO) -> range:
    """Write `block` (the rows of `older`'s file, all of them) to `f` at its position, never
    through the mapping: the whole blocks of it that lie at the offsets they have in that
    file (its header as long as the one just written) copied in the kernel (`_copied`), the
    range returned (for `unchanged`); the rest, or all of it where the kernel cannot copy it,
    read and verified block by block (`PageCheck.read`)."""
    start = _offset(_mapping(block))
    stop = start + block.nbytes
    low, high = -(-start // BLOCK) * BLOCK, stop // BLOCK * BLOCK
    if start != f.tell() or low >= high:
        _copy_read(older, f, start, stop)
        return range(0)
    _copy_read(older, f, start, low)
    kept = range(low // BLOCK, high // BLOCK)
    if not _copied(str(older.path), f, low, high - low):
        _copy_read(older, f, low, high)
        kept = range(0)
    _copy_read(older, f, high, stop)
    return kept


def _copy_read(check: PageCheck, f: BinaryIO, start: int, stop: int) -> None:
    """Write bytes [start, stop) of the file `check` checks to `f`, read and verified `RUN`
    blocks at a time (`SnapshotDamaged`; a file cut short fails at its first missing block)."""
    for at in range(start, stop, BLOCK * RUN):
        f.write(check.read(at, min(BLOCK * RUN, stop - at)))


def _copied(source: str | None, f: BinaryIO, at: int, size: int) -> bool:
    """Copy bytes [at, at + size) of the file `source` to `f`, which is at `at`, in the
    kernel (`os.copy_file_range`), not read through a mapping, whose every page the write
    made resident in this process. False (nothing written) when it cannot be."""
    if source is None or f.tell() != at:
        return False
    if not hasattr(os, "copy_file_range"):  # (Linux only)
        return False
    f.flush()
    try:
        with open(source, "rb") as src:
            done = 0
            while done < size:
                step = os.copy_file_range(
                    src.fileno(), f.fileno(), size - done, at + done, at + done
                )
                if step <= 0:
                    raise OSError("the older snapshot's file ended early")
                done += step
    except OSError:  # (another file system, none of it, or cut: written another way)
        os.ftruncate(f.fileno(), at)
        return False
    f.seek(at + size)
    return True


def checked_bytes(path: Path, size: int, crc: int) -> npt.NDArray[np.uint8]:
    """The bytes of a snapshot's small file, read once (into a buffer of its own, writable)
    and checked whole (`ValueError`: not the `size` bytes of CRC-32 `crc` its manifest
    holds): what is used of it is what was checked, never mapped (a file cut or changed in
    place after its check was a process killed by SIGBUS, or its zeros written into a new
    snapshot under fresh checksums)."""
    data = np.empty(size, dtype=np.uint8)  # (not zeroed first: its pages touched once)
    handle, _ = open_regular(path)
    with handle:
        fd, got = handle.fileno(), 0
        while got < size and (more := os.preadv(fd, [data[got:].data], got)):
            got += more
        longer = os.pread(fd, 1, size)  # (grown since its size was compared)
    if got != size or longer or _core.crc32(data, 0) != crc:
        raise ValueError(f"{path.name} fails its checksum")
    return data


_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def npy_of(data: npt.NDArray[np.uint8], *, writable: bool = False) -> npt.NDArray[Any]:
    """The array a ``.npy`` file's bytes hold (no pickled objects), over those bytes:
    read-only unless `writable` (as a copy-on-write mapping was)."""
    f = io.BytesIO(data.data)
    version = np.lib.format.read_magic(f)
    read = _HEADERS.get(version)
    if read is None:
        raise ValueError(f".npy format version {version} is not read")
    shape, fortran, dtype = read(f)
    if fortran or dtype.hasobject:
        raise ValueError("a .npy array in Fortran order or of objects is not read")
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(data, dtype=dtype, count=count, offset=f.tell()).reshape(shape)
    array.flags.writeable = writable
    return array


def sums(tmp: Path, large: tuple[str, ...]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Each file's size and CRC-32 in `tmp` (by name), and the CRC-32 of each block of the
    `large` ones (by name, in that order), each file read once (it was read twice)."""
    files, blocks = {}, {}
    for path in sorted(tmp.iterdir()):
        if path.name in large:
            crc, blocks[path.name] = file_sums(path)
        else:
            crc = file_crc(path)
        files[path.name] = [path.stat().st_size, crc]
    return files, {name: blocks[name] for name in large}
