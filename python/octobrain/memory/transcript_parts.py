"""A session transcript's digest read a bounded part at a time (`READ_BYTES` from where the
session's last hook stopped, `transcript_file`), and the last few parts read kept: the
resident service reads a hook's part before the command that stores it runs."""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from octobrain.memory import transcript_file
from octobrain.memory.hooks import Digest, digest_transcript
from octobrain.memory.transcript_branch import Branch, is_off
from octobrain.memory.transcript_file import check_before, entries_from, open_transcript

__all__ = ["Part", "transcript_part"]


@dataclass(frozen=True)
class Part:
    """What one hook read of a transcript: the digest of bytes `start` to `end` (up to twice
    the points a digest keeps, so that merged with the points already held none is missed),
    the file's size then, and whether anything is left to read (`done`: the file's end, the
    `TRANSCRIPT_BYTES` bound, or every kind of point found)."""

    digest: Digest
    start: int
    end: int
    size: int
    done: bool
    check: str


_READ: OrderedDict[tuple[object, ...], Part] = OrderedDict()  # the last few parts read
_READ_LOCK = threading.Lock()
_READ_KEPT = 4


def transcript_part(path: str | Path, cwd: str = "", start: int = 0) -> Part:
    """The digest of at most `READ_BYTES` of a transcript from byte `start` (a line boundary),
    remembered for the file as it is now (device, inode, size, modification time): the
    resident service reads a hook's transcript before it waits for its turn to run commands
    (`service_daemon.Service._prefetch`), so a large one does not hold every other caller."""
    try:
        st = os.stat(path)
        key: tuple[object, ...] | None = (
            os.path.abspath(path),
            cwd,
            start,
            transcript_file.READ_BYTES,
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
        )
    except (OSError, ValueError):
        key = None  # open_transcript names what is wrong with the path
    if key is not None:
        with _READ_LOCK:
            if key in _READ:
                return copy.deepcopy(_READ[key])
    part = _read_part(path, cwd, start)
    if key is not None:
        with _READ_LOCK:
            _READ[key] = copy.deepcopy(part)
            while len(_READ) > _READ_KEPT:
                _READ.popitem(last=False)
    return part


def _read_part(path: str | Path, cwd: str, start: int) -> Part:
    handle = open_transcript(path)
    size = os.fstat(handle.fileno()).st_size
    most = min(transcript_file.READ_BYTES, transcript_file.TRANSCRIPT_BYTES - start)
    # The branch Claude Code resumes, as far as this part shows it (`memory ingest` reads the
    # same): a prompt edited away is no decision taken. Each line is parsed once: the part's
    # entries are held, each with where a reader stopping after it has read to, until the
    # branch is known (a second parse for the branch cost a 32 MiB part's hook 43%).
    branch = Branch()
    ends = [start]
    read = [
        (ends[0], e) for _, e in branch.noted(entries_from(handle, Path(path), start, most, ends))
    ]
    off = branch.off()
    stop = [ends[0]]

    def kept() -> Iterator[dict[str, Any]]:
        for end, entry in read:
            if not is_off(entry, off):
                stop[0] = end  # (the digest may stop after this one: full)
                yield entry
        stop[0] = ends[0]

    digest = digest_transcript(kept(), cwd, room=2)
    full = digest.full_for(2)
    end = stop[0]
    done = full or len(ends) == 1 or end >= transcript_file.TRANSCRIPT_BYTES
    return Part(digest, start, end, size, done, check_before(path, end))
