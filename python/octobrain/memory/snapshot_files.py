"""The large files of a snapshot being written (`memory.snapshot`): its vectors, linked or
copied from an older snapshot's file where they can be rather than read through its mapping,
and every file's checksums, each file read once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from octobrain.memory.page_check import file_crc, file_sums


def write_vectors(path: Path, blocks: list[npt.NDArray[np.float32]], dim: int) -> None:
    """The vectors as ``.npy``. When they are one whole ``.npy`` file already (mapped: an
    older snapshot's, or a build's scratch file), that file is linked (or copied from file
    to file), not read through its mapping into this process."""
    source = _whole_file(blocks)
    if source is not None:
        try:
            os.link(source, path)  # (its bytes were synced as that file was written)
        except OSError:
            shutil.copyfile(source, path)
            with path.open("rb+") as f:
                os.fsync(f.fileno())
        return
    with path.open("wb") as f:
        rows = sum(len(b) for b in blocks)
        header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
        np.lib.format.write_array_header_1_0(f, header)
        if _copied(blocks[0], f):  # (the older snapshot's rows, from file to file)
            blocks = blocks[1:]
        for block in blocks:
            f.write(np.ascontiguousarray(block, dtype="<f4").data.cast("B"))
        f.flush()
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


def _copied(block: npt.NDArray[np.float32], f: BinaryIO) -> bool:
    """Copy `block` to `f` at its position from the file it maps, when it is the whole of
    a float32 ``.npy`` file (an older snapshot's vectors, before the rows added since) whose
    header is as long as the one just written: in the kernel (`os.copy_file_range`), not
    read through the mapping, whose every page the write made resident in this process.
    False (nothing written) when it cannot be."""
    source, at = _whole_file([block]), f.tell()
    if source is None or not isinstance(block, np.memmap) or block.offset != at:
        return False
    if not hasattr(os, "copy_file_range"):  # (Linux only)
        return False
    f.flush()
    try:
        with open(source, "rb") as src:
            done = 0
            while done < block.nbytes:
                step = os.copy_file_range(
                    src.fileno(), f.fileno(), block.nbytes - done, at + done, at + done
                )
                if step <= 0:
                    raise OSError("the older snapshot's vectors ended early")
                done += step
    except OSError:  # (another file system, or none of it: written from the mapping)
        os.ftruncate(f.fileno(), at)
        return False
    f.seek(at + block.nbytes)
    return True


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
