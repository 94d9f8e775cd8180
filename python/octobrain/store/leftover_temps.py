"""Temporary files a killed LanceDB write leaves in a local store's tables.

LanceDB writes each data file (and an index's files) to a temporary file beside it, named as
Rust's `tempfile` names them (`.tmp` and six letters or digits), and renames it into place when
it is whole. A process killed meanwhile (SIGKILL, the OOM killer, a power cut) leaves that file
for good: its own cleanup (`optimize`, `cleanup_old_versions`) removes only the files it made
and no version names, never these. One is left per write cut short, from empty to the size of
the batch (20 MB for 20,000 rows), in `<table>.lance/data/`.

`doctor` names those over `AGE_S` old (a younger one may be a write under way, of any
process) that no process holds open (a write paused longer, by a program that takes no
octobrain lock: LanceDB keeps what it writes in memory, so the file's time stays its
creation's); `doctor --drop-temporary-files` removes them under the store's write locks, so
that no octobrain write is under way, and only those still left so. Nothing else is touched: a
data file is named for the fragment it holds, never `.tmp…`. Object stores have none (their
writes are whole objects or multipart uploads).
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from octobrain.store.doctor_report import Problem

if TYPE_CHECKING:
    from collections.abc import Iterator

    from octobrain.store.location import StoreLocation

AGE_S = 3600.0  # older than any write under way: a batch is written in seconds
_NAME = re.compile(r"\.tmp[A-Za-z0-9]{6}")  # (`tempfile::Builder`'s default: prefix, 6 random)
_FOLDERS = ("data", "_deletions", "_versions", "_transactions")  # and each index's folder
_LOCK_S = 120.0
REPAIR = "`octobrain doctor --drop-temporary-files` deletes them (LanceDB never does)"


@dataclass(frozen=True)
class Leftover:
    path: str  # under the store
    size: int


def find(location: StoreLocation, now: float | None = None) -> list[Leftover]:
    """The temporary files over `AGE_S` old in the store's table folders that no process
    holds open (none remote)."""
    if location.path is None:
        return []
    root = str(location.path)
    cutoff = (time.time() if now is None else now) - AGE_S
    found: list[tuple[Leftover, tuple[int, int]]] = []
    for folder in _table_folders(root):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # absent, or not to be listed (opening the table says what is wrong)
        for entry in entries:
            if not _NAME.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                leftover = Leftover(os.path.relpath(entry.path, root), st.st_size)
                found.append((leftover, (st.st_dev, st.st_ino)))
    held = _held_open() if found else set()
    return [leftover for leftover, file in found if file not in held]


def _held_open() -> set[tuple[int, int]]:
    """The files (device, inode) that the processes this user may look at hold open (read
    in Linux's /proc; none where it is not mounted)."""
    held: set[tuple[int, int]] = set()
    try:
        pids = [e.path for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return held
    for pid in pids:
        try:
            fds = list(os.scandir(os.path.join(pid, "fd")))
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                st = os.stat(fd.path)
            except OSError:
                continue
            held.add((st.st_dev, st.st_ino))
    return held


def _table_folders(root: str) -> Iterator[str]:
    """The folders of each table (`<name>.lance`) of the store that LanceDB writes files in."""
    try:
        tables = [e.path for e in os.scandir(root) if e.name.endswith(".lance") and e.is_dir()]
    except OSError:
        return
    for table in sorted(tables):
        yield from (os.path.join(table, folder) for folder in _FOLDERS)
        try:
            indices = [e.path for e in os.scandir(os.path.join(table, "_indices")) if e.is_dir()]
        except OSError:
            continue
        yield from sorted(indices)


def problems(location: StoreLocation) -> list[Problem]:
    """What `doctor` says of them: one problem per table that has any."""
    by_table: dict[str, list[Leftover]] = {}
    for leftover in find(location):
        by_table.setdefault(leftover.path.split(os.sep, 1)[0], []).append(leftover)
    said = []
    for folder, leftovers in sorted(by_table.items()):
        size = sum(leftover.size for leftover in leftovers)
        said.append(
            Problem(
                folder.removesuffix(".lance"),
                f"{len(leftovers)} temporary file(s) of {size:,} bytes that writes killed "
                f"half-way left, over an hour old (first: {leftovers[0].path})",
                REPAIR,
                damage=False,
            )
        )
    return said


def remove(location: StoreLocation) -> tuple[int, int]:
    """Delete the temporary files over `AGE_S` old, found again under the store's write locks
    (memories and knowledge): how many, and their bytes."""
    if location.path is None:
        return 0, 0
    removed = size = 0
    with location.lock("write", _LOCK_S), location.lock("knowledge", _LOCK_S):
        for leftover in find(location):
            try:
                os.unlink(os.path.join(location.path, leftover.path))
            except FileNotFoundError:
                continue
            removed, size = removed + 1, size + leftover.size
    return removed, size
