"""A local table's files that are not regular ones (a FIFO, a device, a socket): Lance opens
such a file itself and, a FIFO, waits on it for good, so a table holding one is refused before
it is opened (`not_regular`), by listing its folders; and one that appears after the open, under
a long-lived process that would read it at its next call (`NewOdd`) or in its background work
(`OddGuard`). So is a version manifest of the other naming scheme than the table's others,
which Lance refuses to open the table beside, naming no file.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation


class Odd(str):
    """A path under the store that is not what Lance keeps there (`said`: what it is)."""

    said: str

    def __new__(cls, path: str, said: str) -> Odd:
        odd = super().__new__(cls, path)
        odd.said = said
        return odd


NOT_REGULAR = "is not a regular file"
NOT_A_FOLDER = "is a file where Lance keeps a folder"
OTHER_SCHEME = (
    "is a version manifest named in another of Lance's naming schemes than the table's other "
    "manifests (a file copied from another copy of the table): Lance opens no table holding "
    "both, so every command that reads the table fails on it"
)
# A version manifest's name: `<version>.manifest` (V1), or 20 digits counting down (V2).
_MANIFEST = re.compile(r"(\d+)\.manifest")
_V2_DIGITS = 20


def not_regular(location: StoreLocation, name: str) -> Odd | None:
    """The first file of local table `name` (its versions, data, deletions, transactions and
    each index's folder under `_indices`) that is not a regular file, or the first of those
    folders that is a file, as a path under the store, else None: Lance opens such a file
    itself and, a FIFO, waits on it for a writer for good; and in place of a folder one
    fails every write ("File exists") while reads go on. Listings, no `stat` (the type comes
    with the entry), so a table's open costs a few directory reads."""
    if location.path is None:
        return None
    root = location.path / f"{name}.lance"
    for folder in ("_versions", "data", "_deletions", "_transactions"):
        entries = _entries(root / folder)
        if entries is None:
            return Odd(f"{name}.lance/{folder}", NOT_A_FOLDER)
        for entry in entries:
            if not _is_file(entry):
                return Odd(f"{name}.lance/{folder}/{entry.name}", NOT_REGULAR)
        other = _other_scheme(entries) if folder == "_versions" else None
        if other is not None:
            return Odd(f"{name}.lance/{folder}/{other}", OTHER_SCHEME)
    # One folder per index, its files in it (a folder in there is left to Lance).
    found = _entries(root / "_indices")
    if found is None:
        return Odd(f"{name}.lance/_indices", NOT_A_FOLDER)
    for index in (e for e in found if _is_dir(e)):
        for entry in _entries(Path(index.path)) or ():
            if not _is_file(entry) and not _is_dir(entry):
                return Odd(f"{name}.lance/_indices/{index.name}/{entry.name}", NOT_REGULAR)
    return None


def _other_scheme(entries: list[os.DirEntry[str]]) -> str | None:
    """The first version manifest among `entries` named in the scheme fewer of them are (the
    older one, V1, when as many), when both are there: Lance refuses to open the table
    ("Found multiple manifest naming schemes"), and the repair it names cannot run."""
    by_scheme: dict[bool, list[str]] = {False: [], True: []}
    for entry in entries:
        found = _MANIFEST.fullmatch(entry.name)
        if found is not None:
            by_scheme[len(found.group(1)) == _V2_DIGITS].append(entry.name)
    older, newer = by_scheme[False], by_scheme[True]
    if not older or not newer:
        return None
    return min(newer if len(newer) < len(older) else older)


_FOLDERS = ("_versions", "data", "_deletions")  # what a read of a newer version opens


def unreadable(location: StoreLocation, name: str) -> str | None:
    """The first folder or file that a read of local table `name` opens (its folder, versions,
    data, deletions, each index's files) and this user may not read (`os.access`: its mode or
    owner; a copy made by another user, a `chmod`), as a path under the store, else None.
    Lance reports only "Permission denied", naming no file."""
    if location.path is None:
        return None
    root = location.path / f"{name}.lance"
    folders = [root, *(root / f for f in _FOLDERS), root / "_indices"]
    folders += [Path(e.path) for e in _entries(root / "_indices") or () if _is_dir(e)]
    for folder in folders:
        if folder.is_dir() and not os.access(folder, os.R_OK | os.X_OK):
            return str(folder.relative_to(location.path))
        for entry in _entries(folder) or ():
            if _is_file(entry) and not os.access(entry.path, os.R_OK):
                return str(Path(entry.path).relative_to(location.path))
    return None


def outermost_unreadable(folder: Path) -> Path | None:
    """The outermost folder on the way to `folder` that this user may not enter, or `folder`
    itself when it may not list it (its mode or owner), else None: a store folder another
    user's was named by the innermost folder a read listed, inside it."""
    for step in [*reversed(folder.parents), folder]:
        need = os.R_OK | os.X_OK if step == folder else os.X_OK
        if step.is_dir() and not os.access(step, need):
            return step
    return None


def denied_said(path: object) -> str:
    """`path` named as one this user may not read, with the repair."""
    return f"{path} cannot be read by this user, its mode or owner: {access_repair(path)}"


def access_repair(path: object) -> str:
    """The repair of a file or folder of the store this user may not read or write (`path`:
    its name, or "it"), said alike by every command and by `doctor`."""
    return f"give the user running octobrain read and write access to {path} (`chmod`, `chown`)"


class NewOdd:
    """The files that appeared in the local store `root`'s tables since the last look, the
    first that is not regular: a commit of another process that a long-lived process reads
    at its next call (its version manifest, data and deletion files, an index's files), and a
    FIFO in the place of one would hold that call, and every call after it, for good.

    A folder is listed again only when its own `stat` changed (a file added or removed), and
    only the names not seen before are looked at, by the type their listing gives (no `stat`):
    a few `stat` calls per table and look. The first look lists every folder."""

    def __init__(self, root: str, tables: tuple[str, ...]) -> None:
        self.root = root
        self._folders = [
            os.path.join(f"{name}.lance", folder) for name in tables for folder in _FOLDERS
        ]
        self._indices = [os.path.join(f"{name}.lance", "_indices") for name in tables]
        self._stamps: dict[str, tuple[int, int, int]] = {}
        self._names: dict[str, set[str]] = {}

    def first(self) -> str | None:
        """The first file not regular among those new since the last look (a path under the
        store), else None."""
        for indices in self._indices:
            for entry in self._new(indices):  # one folder per index, watched from then on
                if _is_dir(entry):
                    self._folders.append(os.path.join(indices, entry.name))
                elif not _is_file(entry):
                    return os.path.join(indices, entry.name)
        for folder in self._folders:
            for entry in self._new(folder):
                if not _is_file(entry) and not (_is_dir(entry) and "_indices" in folder):
                    return os.path.join(folder, entry.name)
        return None

    def _new(self, folder: str) -> list[os.DirEntry[str]]:
        """The entries of `folder` not seen at the last look (none when its `stat` is as then)."""
        where = os.path.join(self.root, folder)
        try:
            st = os.stat(where)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if self._stamps.get(folder) == stamp:
                return []
            entries = list(os.scandir(where))
        except OSError:  # absent (a table not made yet), or not to be listed: the open says
            self._stamps.pop(folder, None)
            return []
        known = self._names.get(folder, set())
        self._stamps[folder] = stamp
        self._names[folder] = {e.name for e in entries}
        return [e for e in entries if e.name not in known]


class OddGuard:
    """A `NewOdd` a process's background work shares (the access-count commits, the sleep
    pass, the service's maintenance and its settling before exit), which read and commit the
    store outside the per-call check (`StoreWatch`): each asks it first and skips its work
    when it names a file. Looks are taken under a lock, and a file found stays the answer
    while it is still there and not regular, so that the work asking after the look that
    found it is held back too."""

    def __init__(self, root: str, tables: tuple[str, ...]) -> None:
        self.root = root
        self._odd = NewOdd(root, tables)
        self._found: str | None = None
        self._lock = threading.Lock()

    def first(self) -> str | None:
        """A file of the store's tables that is not regular (a path under the store), new
        since the last look or found then and still there, else None."""
        with self._lock:
            if self._found is not None and _odd(os.path.join(self.root, self._found)):
                return self._found
            self._found = self._odd.first()
            return self._found


def _odd(path: str) -> bool:
    """Whether `path` is there and not a regular file (`lstat`: nothing is opened)."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    """Whether `entry` is a regular file or a link to one; False for a link that cannot be
    followed (a loop raises ELOOP: `doctor` printed its traceback, every command blamed it on
    free space)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether `entry` is a folder or a link to one (False for a link that cannot be followed)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _entries(folder: Path) -> list[os.DirEntry[str]] | None:
    """The folder's entries; None when it is a file."""
    try:
        return list(os.scandir(folder))
    except NotADirectoryError:
        return None
    except OSError:
        return []  # absent, or not to be listed: opening the table says what is wrong
