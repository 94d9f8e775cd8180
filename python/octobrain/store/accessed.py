"""Accesses counted by a process that never opened LanceDB, kept as small files until a process
that opens the tables commits them (`MemoryStore`: `count_kept_access`, `keep_access` and
`kept_access` are its side of them, here).

A new process whose `remember` a current snapshot serves (`memory.corpus`) imports no LanceDB.
Committing its access counts would import it at exit (a third of such a process) and make a
new version of `memories`, so that the next new process could not be served by the snapshot
either. It writes them here instead, one file per flush under `_octobrain/accessed/` of a local
store (`{"at": <ISO time>, "window_s": <seconds>, "ids": [...]}`), whole or not at all (written
beside its name and renamed to it). The next process that opens the tables claims every file
(renames it to its own name, so two never count one file), counts them in one commit as the
in-process queue counts one interval (each id once, unless accessed within the window, at the
latest time) and removes them; a file it could not count is put back. Until then a reader the
snapshot serves applies them to its mirror, so an acknowledged access shows in the ranking and
in `get` at once.

Bounded: past `MAX_FILES` files a process commits its own counts, and so opens the tables and
counts the rest. A file that does not read as one of these (a damaged disk) is dropped with a
warning, and a claim left by a process that died before its commit is taken back after
`STALE_CLAIM_S`: an access count is a ranking signal, never a memory (`memory.access`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from octobrain.errors import StorageError
from octobrain.files import read_regular
from octobrain.store.location import StoreLocation
from octobrain.store.table_files import access_repair, denied_said, outermost_unreadable

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

log = logging.getLogger(__name__)

FOLDER = "accessed"  # under the store's `_octobrain/`
MAX_FILES = 64
MAX_BYTES = 1 << 20  # one flush names at most a search's results: a few kB
STALE_CLAIM_S = 600.0
_SUFFIX, _CLAIMED = ".json", ".claimed-"


@dataclass(frozen=True)
class Accessed:
    """What the files name: each id once, the latest time and the shortest window."""

    ids: list[str]
    at: datetime
    window: timedelta


def _folder(location: StoreLocation) -> Path | None:
    return None if location.path is None else location.path / "_octobrain" / FOLDER


def _names(folder: Path) -> list[str]:
    """The folder's entries but folders (no writer makes one; removing it failed the open with
    a traceback); none when it is not there, or is not a folder (what a search reads through
    `waiting`: an access count is a ranking signal, and a `remember` ended in a traceback;
    writing there says what is wrong instead)."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except PermissionError as exc:  # (another user's folder, a chmod: `remember`'s traceback)
        outer = outermost_unreadable(folder)
        if outer not in (None, folder):  # (the store's folder, say: not a folder inside it)
            raise StorageError(f"store: {denied_said(outer)}") from exc
        raise StorageError(
            f"store: {folder.parent.parent}: _octobrain/{FOLDER} cannot be read by this user "
            f"({exc.strerror}); {REPAIR}"
        ) from exc


REPAIR = access_repair("it")


def write(location: StoreLocation, ids: Sequence[str], at: datetime, window: timedelta) -> bool:
    """Keep these accesses for the next process that opens the tables; False (nothing kept)
    on an object store and once `MAX_FILES` wait: the caller commits them itself."""
    folder = _folder(location)
    if folder is None or len(_names(folder)) >= MAX_FILES:
        return False
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder: move it aside to keep access counts")
    folder.mkdir(parents=True, exist_ok=True)
    record = {"at": at.isoformat(), "window_s": window.total_seconds(), "ids": list(ids)}
    name = f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}{_SUFFIX}"
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps(record), encoding="utf-8")
    os.replace(tmp, folder / name)
    return True


def waiting(location: StoreLocation) -> Accessed | None:
    """What the files written and not yet counted name (claimed ones too: their commit may
    not have landed), or None when there are none."""
    folder = _folder(location)
    if folder is None:
        return None
    paths = [folder / n for n in _names(folder) if not n.startswith(".")]
    return read(paths)


def claim(location: StoreLocation) -> list[Path]:
    """Take the waiting files for this process to count (renamed to its claim), with the
    claims of processes that died before counting theirs (and drop what writers that died
    left half written)."""
    folder = _folder(location)
    if folder is None:
        return []
    mine = f"{_CLAIMED}{os.getpid()}-{secrets.token_hex(4)}"
    taken = []
    for name in _names(folder):
        path = folder / name
        if name.startswith("."):  # a file being written, or left by a writer that died
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime >= STALE_CLAIM_S:
                    path.unlink()
            continue
        if _CLAIMED in name:
            try:
                if time.time() - path.stat().st_mtime < STALE_CLAIM_S:
                    continue  # another process is counting it
            except FileNotFoundError:
                continue
            name = name.split(_CLAIMED, 1)[0]
        target = folder / f"{name}{mine}"
        try:
            os.rename(path, target)
        except FileNotFoundError:  # claimed (or counted) by another process meanwhile
            continue
        os.utime(target)  # (a claim's age runs from when it was taken)
        taken.append(target)
    return taken


def unclaim(paths: Sequence[Path]) -> None:
    """Put back files this process claimed and could not count."""
    for path in paths:
        original = path.with_name(path.name.split(_CLAIMED, 1)[0])
        try:
            os.rename(path, original)
        except OSError:
            log.warning("access counts in %s could not be put back", path, exc_info=True)


def remove(paths: Sequence[Path]) -> None:
    """Remove files whose accesses were committed (one that cannot be is left, said once)."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("access counts in %s stay: %s", path, exc)


def read(paths: Sequence[Path]) -> Accessed | None:
    """What `paths` name together (None for none); a file that is not one is dropped."""
    ids: dict[str, None] = {}
    at: datetime | None = None
    window: timedelta | None = None
    for path in paths:
        try:
            record = json.loads(read_regular(path, MAX_BYTES)[0])
            when = datetime.fromisoformat(record["at"])
            span = timedelta(seconds=float(record["window_s"]))
            named = [i for i in record["ids"] if isinstance(i, str)]
        except FileNotFoundError:
            continue  # counted meanwhile
        except (OSError, ValueError, KeyError, TypeError, OverflowError, RecursionError):
            log.warning("dropping %s: not a record of access counts", path)
            remove([path])
            continue
        if when.tzinfo is None:
            log.warning("dropping %s: its time has no zone", path)
            remove([path])
            continue
        ids.update(dict.fromkeys(named))
        at = when if at is None else max(at, when)
        window = span if window is None else min(window, span)
    if not ids or at is None or window is None:
        return None
    return Accessed(list(ids), at, window)


def count_kept_access(store: MemoryStore) -> None:
    """Commit the access counts processes of their own kept for the next process that
    opens the tables (`claim`): done as this one opens them, before it reads, so
    it shows them (a long-lived process also asks before each call). Never fails the open:
    an access count is a ranking signal."""
    if store._finishing_restore or store._memories is None:
        return
    try:
        claimed = claim(store.location)
    except OSError as exc:  # a read-only store still answers questions
        log.warning("access counts not recorded: %s", exc)
        return
    if not claimed:
        return
    kept = read(claimed)
    try:
        if kept is not None:
            store.record_access(kept.ids, kept.at, min_interval=kept.window)
    except Exception as exc:  # (as above; a damaged table is the read's to report)
        log.warning("access counts not recorded: %s", exc)
        unclaim(claimed)
    else:
        remove(claimed)


def keep_access(
    store: MemoryStore, ids: Sequence[str], now: datetime, *, min_interval: timedelta
) -> bool:
    """`record_access` left to the next process that opens the tables (`write`);
    False when it cannot be (an object store, enough are waiting, or this process is the
    resident service): commit instead."""
    return store.keeps_access and write(store.location, ids, now, min_interval)


def kept_access(store: MemoryStore) -> Accessed | None:
    """The accesses kept and not yet committed (`keep_access`)."""
    return waiting(store.location)
