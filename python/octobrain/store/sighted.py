"""The newest version of each table this process committed or opened, kept in memory.

A table's newest version is known on disk three ways: its manifest, Lance's hint
(`latest_version_hint.json`) and octobrain's record (`highwater`, `_octobrain/versions.json`).
With all three deleted at once under a running MCP server or resident service (a sync or a
restore of part of the folder, an `rm`), the table reopened one version back and the process
answered from it without a word, and its next write buried the loss. What the process itself
committed or opened is a fourth witness no file holds: `versions.lost_version` asks it when
the hint is gone, and refuses a table that opens below it.

Kept by store and table across the store's reopening (a new `StoreLocation` each time), with
when the process last saw that version: a table started over since (dropped and made again by
another process) has only versions committed after that, which is no loss (`versions`).
A table this process drops (`doctor --recreate`) is forgotten here when its record entry is.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

_SIGHTED: dict[tuple[str, str], tuple[int, float]] = {}  # (store, table) -> (version, seen at)
_LOCK = threading.Lock()
_clock = time.time  # (a test's writes made "an hour ago" are seen then too)


def _key(location: StoreLocation, name: str) -> tuple[str, str]:
    # (one key however a local store's path is spelled: `~/x`, a symlink, a relative path)
    where = location.uri if location.path is None else os.path.realpath(location.path)
    return where, name


def sight(
    location: StoreLocation, name: str, version: int | None, *, accepted: bool = False
) -> None:
    """Note that table `name` is at `version` now (None: dropped by this process, forgotten).
    A lower version than the one noted is taken only when `accepted` (an open that found the
    table sound at it: `lost_version` judged it, a table started over or a backup with its
    own hint); otherwise it changes nothing (a handle opened before a later commit here)."""
    key = _key(location, name)
    with _LOCK:
        if version is None:
            _SIGHTED.pop(key, None)
            return
        known = _SIGHTED.get(key)
        if accepted or known is None or version >= known[0]:
            _SIGHTED[key] = (int(version), _clock())


def sighted(location: StoreLocation, name: str) -> tuple[int, float] | None:
    """The newest version of table `name` this process committed or opened, and when it last
    saw it (`time.time()`), or None."""
    with _LOCK:
        return _SIGHTED.get(_key(location, name))
