"""The stores this machine has used, so a store that is gone is refused, not made again empty.

A store's directory can vanish whole: its disk not mounted (`storage.uri` on another volume),
the directory deleted, a bucket prefix wiped. Nothing in the store is left to say it existed
(the store manifest, `manifest.py`, goes with it), and a fresh empty store made in its place
answers every search with nothing, and takes the writes that follow (hidden again when the
disk is mounted back). So the first open of a store's tables leaves a small file in the data
dir, `<data dir>/stores/<hash of the URI>.json` (the URI and when), and a store that holds no
table while that file is there is refused (`manifest.open_or_create`). Deleting that file is
how to start a new, empty store at the same place on purpose.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from octobrain.config import data_dir
from octobrain.store.location import is_remote, redact

log = logging.getLogger(__name__)

FOLDER = "stores"


def _key(uri: str) -> str:
    """`uri` as marked: a local directory by its absolute path (`db` and `./db` are one)."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def mark_of(uri: str) -> Path:
    """Where the mark of the store at `uri` is kept."""
    key = hashlib.sha256(_key(uri).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return data_dir() / FOLDER / f"{key}.json"


def note_used(uri: str) -> None:
    """Leave the mark of the store at `uri` if it is not there yet (best effort: a data dir
    that cannot be written only loses this protection)."""
    path = mark_of(uri)
    try:
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # (Threads of one process open stores at once: each writes a file of its own.)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"uri": redact(_key(uri)), "first_used": time.time()}, f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        log.debug("could not mark the store %s as used: %s", redact(uri), exc)


def forget(uri: str) -> None:
    """Drop the mark of the store at `uri` (its owner deleted it to make it again)."""
    mark_of(uri).unlink(missing_ok=True)


def gone(uri: str) -> tuple[str, str] | None:
    """Why a store at `uri` that holds no table must not be made there, and the way out
    (None: it may be)."""
    path = mark_of(uri)
    try:
        if not path.exists():
            return None
    except OSError:  # (a mark this user may not look at protects nothing: best effort)
        return None
    when = "before"
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, OverflowError):
        first = json.loads(path.read_text(encoding="utf-8"))["first_used"]
        when = f"since {datetime.fromtimestamp(float(first), timezone.utc):%Y-%m-%d}"
    return (
        f"{redact(uri)} holds no store, yet this machine used one there ({when}): is its disk "
        "not mounted, or was it deleted?",
        "Mount it, or put it back from a backup; to start a new store there (empty, or to "
        f"`octobrain memory import` an export into), delete {path}",
    )


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary directory for throwaway stores (a benchmark's): deleted at exit, and the
    marks of the stores made under it with it, so they do not pile up in the data dir."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        try:
            yield Path(tmp)
        finally:
            root = os.path.abspath(tmp) + os.sep
            for mark in (data_dir() / FOLDER).glob("*.json"):
                with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                    if json.loads(mark.read_text(encoding="utf-8"))["uri"].startswith(root):
                        mark.unlink()
