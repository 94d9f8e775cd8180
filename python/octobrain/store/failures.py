"""What the store's reads and writes fail with: a model other than the store's, a memory not
visible, a row changed under a read-modify-write, a failed commit, each in one line."""

from __future__ import annotations

import functools
import inspect
import os
import re
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from octobrain.errors import InvalidInput, OctobrainError, StorageError
from octobrain.store import manifest
from octobrain.store.endpoint import lacks_credentials, no_credentials, object_store_reason
from octobrain.store.location import StoreLocation
from octobrain.store.table_files import access_repair, denied_said, unreadable

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C", bound=type)


class ModelMismatch(OctobrainError):
    """The store was embedded with another model than the one configured."""


class NotFound(InvalidInput):
    """A memory id that does not exist or is not visible from this scope (a caller's mistake)."""


class RowChanged(StorageError):
    """A read-modify-write found a row it read changed or gone when it came to commit (another
    writer got the store meanwhile: this one's lease lapsed): nothing was written."""


def io_failure(path: object, exc: BaseException, done: str = "nothing was changed") -> str:
    """One line for an I/O failure under `path` (LanceDB reports them as RuntimeError), and
    what the write had `done` before it. On an object store, the endpoint's reason (LanceDB's
    first line named the part upload, cut mid-parenthesis, and said to check free space)."""
    text = str(exc)
    if re.match(r"[a-z][a-z0-9+.-]*://", str(path)) and not str(path).startswith("file://"):
        if lacks_credentials(exc):  # (the endpoint is up: it was never asked)
            return f"store: cannot write to {path}: {no_credentials()}; {done}"
        return (
            f"store: cannot write to {path}: {object_store_reason(exc)}; {done} (check that "
            "the endpoint is up and reachable: storage.uri, storage.options)"
        )
    found = re.search(r"LanceError\(IO\): ([^,\n]+)", text)
    reason = found.group(1) if found else (getattr(exc, "strerror", None) or text.splitlines()[0])
    if _MISPLACED.search(text):  # (not space or permissions: a file where a folder belongs)
        where = getattr(exc, "filename", None) or path
        return (
            f"store: cannot write to {path}: {reason}; {done} (a file stands where the store "
            f"keeps a folder, or a folder where it keeps a file, under {where}: move it aside, "
            "then run `octobrain doctor`)"
        )
    if _LOOPS.search(text):  # (a link that loops where a file belongs: not space either)
        where = str(getattr(exc, "filename", None) or _looped_path(text) or path)
        again = " (the next write makes the lock file again)" if where.endswith(".lock") else ""
        return (
            f"store: cannot write to {path}: {reason}; {done} ({where} is a link that loops, "
            f"where the store keeps a file or folder: move it aside{again}, then run "
            "`octobrain doctor`)"
        )
    denied = _DENIED.search(text) is not None
    lock = _lock_denied(path, exc) if denied else None
    if lock is not None:  # (as `doctor` names it)
        return f"store: cannot write to {path}: {reason}; {done} ({lock_denied_said(lock)})"
    locked = _unreadable_file(path) if denied else None
    if locked is not None:  # (Lance says "Permission denied", naming no file)
        return f"store: cannot write to {path}: {reason}; {done} ({denied_said(locked)})"
    return f"store: cannot write to {path}: {reason}; {done} (check free space and permissions)"


LOCK_REFUSED = "cannot be opened for writing by this user (its mode or owner)"


def lock_denied_said(lock: object) -> str:
    """A store's lock file this user may not open for writing, and the repair."""
    return f"{lock} {LOCK_REFUSED}: {access_repair(lock)}"


def lock_refused(lock: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether this user may not open the lock file `lock` for writing while it may write its
    store's `folder` (else a read-only copy, or another user's store: the lock is not to
    blame), said alike by a write (`io_failure`) and by `doctor`."""
    return not os.access(lock, os.R_OK | os.W_OK) and os.access(folder, os.W_OK)


def _lock_denied(path: object, exc: BaseException) -> str | None:
    """The lock file of the local store at `path` a write was refused (`exc`) for opening,
    when `lock_refused` blames it, else None."""
    lock = getattr(exc, "filename", None)
    if not isinstance(path, StoreLocation) or path.path is None or not isinstance(lock, str):
        return None
    where = os.path.dirname(lock)
    if not lock.endswith(".lock") or os.path.realpath(where) != os.path.realpath(path.path):
        return None
    return lock if lock_refused(lock, where) else None


def _unreadable_file(path: object) -> str | None:
    """The first file or folder of a table of the local store at `path` this user may not
    read (`table_files.unreadable`), as a path under the store, else None."""
    if not isinstance(path, StoreLocation):
        return None
    found = (unreadable(path, name) for name in manifest.KNOWN_TABLES)
    return next((f for f in found if f is not None), None)


def _looped_path(text: str) -> str | None:
    """The path a LanceDB error names for a link that loops ("operation on PATH: Too many")."""
    found = re.search(r"operation on (\S+?):? Too many levels", text)
    return found.group(1) if found else None


def denied_failure(exc: BaseException) -> str | None:
    """One line for a LanceDB read this user may not make (a file or folder of a table it may
    not read: its mode or owner), else None. A write says so itself (`io_failure`);
    a read raised LanceDB's error, a traceback."""
    text = str(exc)
    if not isinstance(exc, RuntimeError | OSError) or "lance error" not in text.lower():
        return None
    if not _DENIED.search(text):
        return None
    return (
        f"store: a file of the store cannot be read by this user ({manifest.short_reason(exc)}); "
        f"nothing was changed. Run `octobrain doctor` to find it, then {access_repair('it')}"
    )


def unreadable_line(exc: BaseException) -> str | None:
    """One line for a LanceDB error that means the store cannot be read: a damaged table
    (`manifest.read_failure`) or a file this user may not read (`denied_failure`), else None.
    Said alike by the facades, the CLI and the MCP server."""
    return manifest.read_failure(exc) or denied_failure(exc)


_DENIED = re.compile(r"permission denied|not permitted|os error 13\b", re.I)


_LOOPS = re.compile(r"Too many levels of symbolic links|os error 40\b")
# What a file or folder of the store replaced by the other kind makes a write fail with.
_MISPLACED = re.compile(r"Is a directory|Not a directory|File exists|os error (?:17|20|21)\b")


class TableUnreadable(StorageError):
    """A call of a facade (`Brain`) failed in LanceDB for a reason that means a table cannot
    be read (its files gone or damaged: a store deleted under a running process): the line
    `manifest.read_failure` gives, and LanceDB's error as `cause`. A library caller catches an
    `OctobrainError`, not a RuntimeError quoting a Rust source path; the CLI and the MCP server
    still name the damaged file from `cause` (`cli.common`, `server.pool`)."""

    def __init__(self, line: str, cause: BaseException) -> None:
        super().__init__(line)
        self.cause = cause


def failures_named(cls: C) -> C:
    """A facade class (`Brain`, `Knowledge`) with each public method through `named_failures`."""
    for name, method in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("_"):
            setattr(cls, name, named_failures(method))
    return cls


def named_failures(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn`, its LanceDB errors that mean a table cannot be read raised as `TableUnreadable`."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except OctobrainError:
            raise
        except Exception as exc:
            line = unreadable_line(exc)
            if line is None:
                raise
            raise TableUnreadable(line, exc) from exc

    return call


class WriteFailed(StorageError):
    """A commit under the write lock failed (a full disk, permissions). Its line says nothing
    was changed, which holds for that commit; a caller that made commits before it says what
    they stored instead (`after`)."""

    def __init__(self, path: object, exc: BaseException) -> None:
        # A write that read the table's files and found them damaged is damage, not a full
        # disk: said as one, the user went looking for free space and never at `doctor`.
        super().__init__(manifest.read_failure(exc) or io_failure(path, exc))
        self.path, self.cause = path, exc

    def after(self, done: str) -> StorageError:
        """The same failure, saying what the earlier commits of this write `done`."""
        damage = manifest.read_failure(self.cause, done)
        return StorageError(damage or io_failure(self.path, self.cause, done))
