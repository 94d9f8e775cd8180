"""Whether a local store's files changed underneath a long-lived process (`StoreWatch`): the
check a warm process (the resident service, the MCP server) makes before each call, at the
cost of a few `stat` calls.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from octobrain.store.manifest import KNOWN_TABLES, MANIFEST
from octobrain.store.table_files import NewOdd, OddGuard
from octobrain.store.versions import VERSIONS, version_of

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

_GUARDS: dict[str, OddGuard] = {}  # one per local store this process uses, by its path
_GUARDS_LOCK = threading.Lock()


def odd_file(location: StoreLocation) -> str | None:
    """A file of a local store's tables that is not regular, new since this process last
    looked or still there since (`table_files.OddGuard`, one a store, shared), else None
    (always on an object store): work off the call path (access counts, the sleep pass,
    maintenance) asks before it reads and is skipped when one is named, as Lance would wait
    on a FIFO for good, holding the lock the next call waits on."""
    if location.path is None:
        return None
    root = os.fspath(location.path)
    with _GUARDS_LOCK:
        guard = _GUARDS.get(root)
        if guard is None:
            guard = _GUARDS[root] = OddGuard(root, KNOWN_TABLES)
    return guard.first()


class StoreWatch:
    """Whether a local store's files changed underneath a long-lived process since it last
    looked: the store manifest rewritten, a known table's directory or version folder deleted
    or replaced, a file of a table a warm process keeps in memory (`MIRRORED`: its data files
    and version manifests, which LanceDB writes once and never again) rewritten in place or a
    data file of it gone (a compaction's cleanup removes old ones: the reopen costs little
    then), or the newest version manifest of one it saw gone (LanceDB's cleanup never removes
    the newest: that is a lost commit, which the reopen then reports, `lost_version`), or a
    file that is not regular (a FIFO) among those any table's commits added (`NewOdd`: Lance
    would open it at the next read and wait on it for good; the reopen refuses the table,
    naming it). An ordinary commit, which only adds files, is no change.

    Cheap enough for every request, whatever the store's history (a week of versions can be
    tens of thousands of files): a folder is listed again only when its own `stat` changed (a
    file added or removed), a new file is looked at once, and of the files already known each
    table's newest manifest and `RESTAT` others in turn are looked at again; a store of up to
    `RESTAT` files has every one looked at on every call, a larger one each within a few
    calls. (It listed and looked at every file on every call: 0.3 s a call at 10,000 versions.)
    """

    RESTAT = 256
    # The tables whose rows a warm process answers from memory (the memories mirror, the
    # knowledge chunks' index and the sources it names): a data file of one damaged under it
    # was answered from memory where a new process fails (a knowledge search in the service).
    MIRRORED = ("memories", "knowledge_chunks", "knowledge_sources")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = os.fspath(path)
        self._ident: tuple[tuple[int, ...], ...] | None = None
        self._files: dict[str, tuple[int, int]] = {}
        self._folders: dict[str, tuple[int, int, int]] = {}  # folder -> its own stat, listed at
        self._newest: set[str] = set()  # the newest version manifest seen of each table
        self._order: list[str] = []  # `_files`' names, in the order they are looked at again
        self._turn = 0  # where the next look at known files starts
        self._gone = False  # a known data file is gone (since `changed` last said so)
        self._odd = NewOdd(self.root, KNOWN_TABLES)

    def _ident_now(self) -> tuple[tuple[int, ...], ...]:
        def ident(where: str, full: bool = False) -> tuple[int, ...]:
            try:
                st = os.stat(where)
            except OSError:
                return ()
            return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if full else (st.st_ino,)

        stamp = [ident(os.path.join(self.root, "_octobrain", MANIFEST), full=True)]
        for name in KNOWN_TABLES:
            table = os.path.join(self.root, f"{name}.lance")
            stamp += [ident(table), ident(os.path.join(table, "_versions"))]
        return tuple(stamp)

    def _file(self, name: str) -> tuple[int, int] | None:
        try:
            st = os.stat(os.path.join(self.root, name))
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def _list(self) -> bool:
        """Bring `_files` to the `MIRRORED` tables' files now: a folder whose `stat` changed is
        listed again (files gone dropped, new ones looked at). Whether any folder was."""
        relisted = False
        for folder, suffix in _folders(self.MIRRORED):
            where = os.path.join(self.root, folder)
            try:
                st = os.stat(where)
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if self._folders.get(folder) == stamp:
                    continue
                names = {
                    f"{folder}/{e.name}"
                    for e in os.scandir(where)
                    if e.name.endswith(suffix) and not e.name.startswith("_latest")
                }
            except OSError:
                stamp, names = None, set()
                if folder not in self._folders:
                    continue  # not there before either: nothing of it is known
            relisted = True
            for name in [n for n in self._files if n.startswith(f"{folder}/") and n not in names]:
                del self._files[name]
                # A compaction's cleanup removes old data files; a hand, current ones. Either
                # way the process reopens, and reads of a current file gone then fail.
                self._gone |= folder.endswith("/data")
            for name in names - self._files.keys():
                seen = self._file(name)
                if seen is not None:
                    self._files[name] = seen
            if stamp is None:
                self._folders.pop(folder, None)
            else:
                self._folders[folder] = stamp
        if relisted:
            self._order = list(self._files)
        return relisted

    def settle(self) -> None:
        """Take the tables and the manifest as they are now, after this process's own call (a
        table it created, a manifest it rewrote). Its commits only add files, which the next
        `changed` compares with nothing; the newest version manifest is its own commit's,
        which a later loss must be told from."""
        if self._ident is not None:
            self._ident = self._ident_now()
            if self._list():
                self._newest = _newest(self._files)
            # A data file gone stays news for the next `changed`: this call's own compaction,
            # or a hand's meanwhile, which `settle` cannot tell apart (one reopen either way).

    def changed(self) -> bool:
        """Whether anything changed since the last call (the first call only looks)."""
        ident = self._ident_now()
        before = self._newest
        relisted = self._list()
        lost = not before <= self._files.keys()
        # Files known before this call, looked at again (new ones were just looked at).
        again = self._order
        if len(again) > self.RESTAT:
            start = self._turn % len(again)
            self._turn = start + self.RESTAT
            again = (again[start : start + self.RESTAT] + again[: self.RESTAT])[: self.RESTAT]
        again = [*again, *(name for name in before if name in self._files)]
        rewritten = False
        for name in again:
            seen, now = self._files.get(name), self._file(name)
            if seen is not None and now is not None and now != seen:
                rewritten = True
                self._files[name] = now
        if relisted or lost:
            self._newest = _newest(self._files)
        changed = (self._ident is not None and ident != self._ident) or rewritten or lost
        changed |= self._gone
        self._gone = False
        odd = self._odd.first()
        if odd is not None:
            log.warning("%s in the store is not a regular file; reopening the store", odd)
            changed = True
        self._ident = ident
        return changed


def _folders(tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """(folder, suffix) of the data files and version manifests of `tables`."""
    return [
        (f"{table}.lance/{folder}", suffix)
        for table in tables
        for folder, suffix in (("data", ".lance"), VERSIONS)
    ]


def _newest(files: dict[str, tuple[int, int]]) -> set[str]:
    """The newest version manifest of each table among `files` (`StoreWatch._files`'s keys)."""
    newest: dict[str, str] = {}
    for name in files:
        table, folder, _ = name.split("/", 2)
        if folder == VERSIONS[0] and (
            table not in newest or version_of(name) > version_of(newest[table])
        ):
            newest[table] = name
    return set(newest.values())
