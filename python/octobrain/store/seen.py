"""The stores this machine has used, so a store that is gone is refused, not made again empty.

A store's directory can vanish whole: its disk not mounted (`storage.uri` on another volume),
the directory deleted, a bucket prefix wiped. Nothing in the store is left to say it existed
(the store manifest, `manifest.py`, goes with it), and a fresh empty store made in its place
answers every search with nothing, and takes the writes that follow (hidden again when the
disk is mounted back). So the first open of a store's tables leaves a small file in the data
dir, `<data dir>/stores/<hash of the place>.json` (the place and when), and a store that holds
no table while that file is there is refused (`manifest.open_or_create`). Deleting that file is
how to start a new, empty store at the same place on purpose.

A store is marked twice when it is reached by another spelling of its place: by its place
(`_key`: the real path, one mark however the path is spelled) and by the spelling the open
used (`_spelled`). Either refuses the store gone whole. The place alone is not enough: with a
store reached through a symlink on the disk that went away, the path no longer resolves to the
place it did, and only the spelling's mark still matches. (Marks left before `_key` existed
are spelling marks: they protect as before.)

A process also keeps the places it opened a store at in memory (`_opened_here`): when the data
dir goes with the store (the store in it, as by default, on a disk that is unmounted or deleted
whole), no mark is left to read, and a running MCP server or resident service answered "none
are stored yet" and made a new store there, which took the next writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from octobrain.config import data_dir
from octobrain.files import drop_dead_leftovers
from octobrain.store.location import is_remote, redact

log = logging.getLogger(__name__)

FOLDER = "stores"
# Keys of the marks (`_keys`) of the stores this process opened, and when it first did: what
# `gone` reads when the marks are gone too.
_opened_here: dict[str, float] = {}


def _key(uri: str) -> str:
    """The place of the store at `uri`, one key however it is spelled. A local directory by
    its real path (`db`, `./db`, `x/../db` and a symlink to it are one); one that is gone, the
    case the mark is for, as far as its path still resolves: its parent's real path and its
    name, the key it had (`os.path.realpath` follows a dangling symlink too, as one to an
    unmounted disk is). A bucket URI without credentials, repeated or trailing slashes
    (`s3://b/p/` and `s3://b//p` are `s3://b/p`)."""
    if is_remote(uri):
        parts = urlsplit(uri)
        path = re.sub("/{2,}", "/", parts.path).rstrip("/")
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme.lower(), netloc, path, parts.query, ""))
    try:
        return os.path.realpath(uri)
    except (OSError, ValueError):  # (a NUL in it: no store opens there either)
        return os.path.abspath(uri)


def _spelled(uri: str) -> str:
    """The key of a mark by spelling (module doc): `uri` as spelled, a local one made
    absolute. The marks left before `_key` existed are all such."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def _file(key: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return data_dir() / FOLDER / f"{digest}.json"


def mark_of(uri: str) -> Path:
    """Where the mark of the store at `uri` is kept."""
    return _file(_key(uri))


def _first_used(path: Path) -> float | None:
    """When the mark at `path` says its store was first used (None: no mark, or no date)."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError, OverflowError):
        first = float(json.loads(path.read_text(encoding="utf-8"))["first_used"])
        datetime.fromtimestamp(first, UTC)  # (a date it can name)
        return first
    return None


def _write(path: Path, uri: str, first: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # (Threads of one process open stores at once: each writes a file of its own.)
    drop_dead_leftovers(path, ".tmp")
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"uri": redact(_key(uri)), "first_used": first}, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def note_used(uri: str) -> None:
    """Leave the marks of the store at `uri` that are not there yet, by its place and by this
    spelling of it (module doc), both dated the earliest first use either records (best
    effort: a data dir that cannot be written only loses this protection)."""
    now = time.time()
    keys = _keys(uri)
    for key in keys:  # (first, and in memory: a data dir not written to still has it)
        _opened_here.setdefault(key, now)
    paths = [_file(key) for key in keys]  # (`_marks`, its keys made once)
    try:
        missing = [path for path in paths if not path.exists()]
        if not missing:
            return
        dates = [d for d in map(_first_used, paths) if d is not None]
        first = min(dates) if dates else now
        for path in missing:
            _write(path, uri, first)
    except OSError as exc:
        log.debug("could not mark the store %s as used: %s", redact(uri), exc)


def _keys(uri: str) -> list[str]:
    """What the marks of the store at `uri` are keyed by: its place, then this spelling."""
    return list(dict.fromkeys((_key(uri), _spelled(uri))))


def _marks(uri: str) -> list[Path]:
    """The marks of the store at `uri`: by its place, then by this spelling (when another)."""
    return list(dict.fromkeys(map(_file, _keys(uri))))


def forget(uri: str) -> None:
    """Drop the marks of the store at `uri` (its owner deleted it to make it again)."""
    for path in _marks(uri):
        path.unlink(missing_ok=True)
    for key in _keys(uri):
        _opened_here.pop(key, None)


def gone(uri: str) -> tuple[str, str] | None:
    """Why a store at `uri` that holds no table must not be made there, and the way out
    (None: it may be)."""
    found = []
    for path in _marks(uri):
        with contextlib.suppress(OSError):  # (a mark this user may not look at: best effort)
            if path.exists():
                found.append(path)
    if not found:
        return _gone_here(uri)
    dates = [d for d in map(_first_used, found) if d is not None]
    day = datetime.fromtimestamp(min(dates), UTC) if dates else None
    when = "before" if day is None else f"since {day:%Y-%m-%d}"
    return (
        f"{redact(uri)} holds no store, yet this machine used one there ({when}): is its disk "
        "not mounted, or was it deleted?",
        "Mount it, or put it back from a backup; to start a new store there (empty, or to "
        f"`octobrain memory import` an export into), delete {' and '.join(map(str, found))}",
    )


def _gone_here(uri: str) -> tuple[str, str] | None:
    """`gone` for a store whose marks are gone with it (the data dir deleted or unmounted too)
    that this process opened: known to it alone, so only a new process starts a new store."""
    dates = [_opened_here[key] for key in _keys(uri) if key in _opened_here]
    if not dates:
        return None
    day = datetime.fromtimestamp(min(dates), UTC)
    return (
        f"{redact(uri)} holds no store, yet this process (pid {os.getpid()}) has used one there "
        f"since {day:%Y-%m-%d %H:%M} UTC, and the record of it in {data_dir() / FOLDER} is "
        "gone too: is its disk not mounted, or was it deleted?",
        "Mount it, or put it back from a backup; to start a new store there, start octobrain "
        "again (the MCP client's server; `octobrain service stop` for the resident service)",
    )


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory for throwaway stores (a benchmark's): deleted at exit, and the
    marks of the stores made in it or under it with it, so they do not pile up in the data
    dir."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            yield Path(tmp)
        finally:
            roots = {_key(tmp), os.path.abspath(tmp)}
            under = tuple(root + os.sep for root in roots)
            for key in [k for k in list(_opened_here) if k in roots or k.startswith(under)]:
                del _opened_here[key]
            for mark in (data_dir() / FOLDER).glob("*.json"):
                with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                    uri = json.loads(mark.read_text(encoding="utf-8"))["uri"]
                    if uri in roots or uri.startswith(under):
                        mark.unlink()
