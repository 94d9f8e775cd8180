"""The times the store's data files were last written, as a snapshot records them beside the
files its versions read (`Snapshot.data_files`): Lance never writes a data file again, so a
file whose time differs since was changed in place (a byte flipped inside a page, its size
and footer intact, which `operations.damaged_among` cannot tell). A new process then does not
answer from the snapshot (its copy of the rows was good): the store's read says what it
finds. A snapshot written before these were recorded is served as before; a store copied
without its times only costs a rebuild from the store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from octobrain.store.operations import file_path

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

Times = dict[str, dict[str, int]]  # by table, each file's (as `data_files` names it) mtime_ns


def stamp(location: StoreLocation, files: dict[str, list[tuple[str, int]]] | None) -> Times | None:
    """The times of the recorded `files` as they are now (a file gone is left out)."""
    if files is None or location.path is None:
        return None
    times: Times = {}
    for name, listed in files.items():
        times[name] = {}
        for path, _ in listed:
            try:
                times[name][path] = os.stat(file_path(location.path, name, path)).st_mtime_ns
            except OSError:
                continue
    return times


def read(recorded: Any) -> Times | None:
    """The times a snapshot's manifest records, or None (none recorded, or not as written)."""
    if not isinstance(recorded, dict):
        return None
    if not all(
        isinstance(files, dict)
        and all(isinstance(p, str) and type(t) is int for p, t in files.items())
        for files in recorded.values()
    ):
        return None
    return {str(name): dict(files) for name, files in recorded.items()}


def changed(location: StoreLocation, times: Times | None) -> str | None:
    """The first recorded file written since its time was recorded, in words; else None (a
    file gone or unreadable is `operations.damaged_among`'s to tell)."""
    if times is None or location.path is None:
        return None
    for name, files in times.items():
        for path, written in files.items():
            try:
                now = os.stat(file_path(location.path, name, path)).st_mtime_ns
            except OSError:
                continue
            if now != written:
                return f"{name}: data file {path} was written since the snapshot recorded it"
    return None
