"""A local table's files that are not regular ones (a FIFO, a device, a socket): Lance opens
such a file itself and, a FIFO, waits on it for good, so a table holding one is refused before
it is opened (`not_regular`), by listing its folders.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation


def not_regular(location: StoreLocation, name: str) -> str | None:
    """The first file of local table `name` (its versions, data, deletions, transactions and
    each index's folder under `_indices`) that is not a regular file, as a path under the
    store, else None: Lance opens such a file itself and, a FIFO, waits on it for a writer
    for good. Listings, no `stat` (the type comes with the entry), so a table's open costs a
    few directory reads."""
    if location.path is None:
        return None
    root = location.path / f"{name}.lance"
    for folder in ("_versions", "data", "_deletions", "_transactions"):
        for entry in _entries(root / folder):
            if not entry.is_file():
                return f"{name}.lance/{folder}/{entry.name}"
    # One folder per index, its files in it (a folder in there is left to Lance).
    indices = [e for e in _entries(root / "_indices") if e.is_dir()]
    for index in indices:
        for entry in _entries(Path(index.path)):
            if not entry.is_file() and not entry.is_dir():
                return f"{name}.lance/_indices/{index.name}/{entry.name}"
    return None


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []  # absent, or not to be listed: opening the table says what is wrong
