"""Opening a file named by someone else (a config path, a hook's transcript, a knowledge
source) only when it is a regular file.

The check is made on the opened descriptor, not on the path before opening it: a name checked
first and opened after can be swapped in between. The open itself does not wait: opening a
FIFO for reading blocks until a writer comes, so the descriptor is opened non-blocking, checked,
and only then made blocking again. A path already resolved and checked (a knowledge source
confined to a project) is opened as that path only: a link put in its way after the check is
not followed to another file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

from octobrain.errors import InvalidInput, OctobrainError, StorageError

if TYPE_CHECKING:  # (pathlib costs the resident service's client 3 ms to import)
    from pathlib import Path

__all__ = [
    "Moved",
    "NotARegularFile",
    "TooLarge",
    "cannot_write",
    "check_path",
    "drop_dead_leftovers",
    "gunzipped",
    "named_by",
    "open_regular",
    "read_regular",
    "replace_whole",
    "replaced_by_write",
    "write_atomic_file",
]


def check_path(field: str, value: object) -> Path:
    """`value` as a `Path` when it is a string or an `os.PathLike` of one, else `InvalidInput`
    naming `field` (pathlib's TypeError named nothing)."""
    path = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(path, str):
        raise InvalidInput(field, f"must be a path (str or PathLike), got {type(value).__name__}")
    if "\x00" in path:
        raise InvalidInput(field, "must not contain NUL characters")
    from pathlib import Path as _Path

    return _Path(path)


class NotARegularFile(OSError):
    """The path names a FIFO, socket, device or the like, not a regular file."""


class Moved(OSError):
    """The file opened is not the one at the resolved path asked for: a symlink was put in
    its place, or in place of a directory above it, after the path was resolved."""


class TooLarge(OSError):
    """The file holds more than the bytes asked for: `size` as its status gave it, or None
    when it grew past the bound while read."""

    def __init__(self, path: str | Path, size: int | None) -> None:
        super().__init__(f"{path} is over the size bound")
        self.size = size


def open_regular(path: str | Path, *, resolved: bool = False) -> tuple[BinaryIO, os.stat_result]:
    """`path` opened for binary reading, with its status, when it is a regular file (symlinks
    followed). A directory raises `IsADirectoryError`, anything else that is not a regular file
    `NotARegularFile`; a missing or unreadable path the `OSError` of the open.

    `resolved`: `path` is absolute with no symlink in it (`os.path.realpath`'s) and was checked
    as such, so the file opened must be the one at that path: a symlink in its place is not
    followed and one in place of a directory above it is caught on the opened file (`Moved`)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    if resolved:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # (a link that loops resolves to itself: no other file is there)
        if resolved and exc.errno == errno.ELOOP and os.path.realpath(path) != str(path):
            raise Moved(f"{path} is now a symlink") from None
        if exc.errno == errno.ENXIO:  # a socket, or a device file with no device behind it
            raise NotARegularFile(f"{path} is not a regular file") from None
        raise
    try:
        status = os.fstat(fd)
        if resolved and not _opened_at(fd, status, str(path)):
            raise Moved(f"{path} is not the file opened")
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(status.st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    # (Made outside the `try`: a Ctrl-C landing once the file object held `fd`, before it was
    # named, closed `fd` there and again as the object went, the second time another thread's
    # file that had taken its number: "Bad file descriptor" reading the store's manifest.)
    return os.fdopen(fd, "rb"), status


def _opened_at(fd: int, status: os.stat_result, path: str) -> bool:
    """Whether the open file `fd` is the file at `path`: by the path the kernel gives the
    descriptor (Linux), else by the file the path names now being the same file."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == path
    except OSError:
        pass
    try:
        now = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (status.st_dev, status.st_ino)


def read_regular(
    path: str | Path, max_bytes: int, *, resolved: bool = False
) -> tuple[bytes, os.stat_result]:
    """The bytes of `path`, with its status, when it is a regular file of at most `max_bytes`
    (`open_regular`'s errors, `resolved` as there; `TooLarge` past the bound, by its status or
    as it was read)."""
    handle, status = open_regular(path, resolved=resolved)
    with handle:
        if status.st_size > max_bytes:
            raise TooLarge(path, status.st_size)
        # As much as its status says, and one byte more: a read of `max_bytes + 1` sets that
        # much memory aside first (64 MiB for a record of a few hundred bytes). A file that
        # grew meanwhile, or says 0 (as /proc's do), is read on up to the bound.
        data = handle.read(status.st_size + 1)
        if len(data) > status.st_size:
            data += handle.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise TooLarge(path, None)
    return data, status


@contextmanager
def named_by(field: str, path: str | Path, directory: str) -> Iterator[None]:
    """The refusals of `open_regular` and `read_regular` inside the block as one line naming
    `field`: no such file, `path` + `directory` for a directory (what to give instead), not a
    regular file, or why it cannot be read. `TooLarge` is the caller's to word, inside the
    block: it names the caller's bound."""
    try:
        yield
    except FileNotFoundError:
        raise InvalidInput(field, f"no such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInput(field, f"{path} {directory}") from None
    except NotARegularFile:  # a FIFO would wait for a writer, /dev/zero never ends
        raise InvalidInput(field, f"{path} is not a regular file") from None
    except Moved:
        raise InvalidInput(
            field, f"{path} changed while it was opened (a symlink took its place); not read"
        ) from None
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {path}: {exc.strerror or exc}") from None


def gunzipped(field: str, data: bytes, max_bytes: int) -> bytes:
    """The bytes of a gzip file (`data`) inflated, each member (as `cat a.gz b.gz` joins
    them), to no more than `max_bytes`: a few kB can inflate to gigabytes. Refused as the
    `InvalidInput` of `field` past the bound or when they cannot be inflated."""
    out = bytearray()
    view, at = memoryview(data), 0
    while any(view[at:]):  # (what follows a member: another, or zeros of padding)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        size = _FIRST_BLOCK
        while not inflater.eof and at < len(view):
            # Fed a block at a time, doubling: what a member leaves (`unused_data`) is a
            # copy, and a copy of the whole rest per member made 8 MB of empty members take
            # minutes; so the bytes handed in stay within a few times the file's.
            block = view[at : at + size]
            size = min(2 * size, _MOST_BLOCK)
            try:
                out += inflater.decompress(block, max_bytes + 1 - len(out))
            except zlib.error as exc:
                raise InvalidInput(
                    field, f"is gzip-compressed but cannot be inflated ({exc})"
                ) from None
            if len(out) > max_bytes:
                raise InvalidInput(field, f"must be at most {max_bytes >> 20} MiB once inflated")
            at += len(block) - len(inflater.unused_data)
        if not inflater.eof:
            raise InvalidInput(
                field, "is gzip-compressed but cannot be inflated (it ends before its data does)"
            )
    return bytes(out)


_FIRST_BLOCK, _MOST_BLOCK = 64, 1 << 20  # (an empty member is 20 bytes)


def replaced_by_write(path: Path) -> Path:
    """The file a write that replaces `path` (a new file moved over it) should replace: a
    symlink's final target, so the link stays a link (a settings file kept in a dotfiles
    repository); `path` itself otherwise."""
    from pathlib import Path as _Path

    return _Path(os.path.realpath(path)) if os.path.islink(path) else path


# Write failures that are the disk's, not the path's (full, over quota, failing).
_DISK_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


def cannot_write(field: str, path: object, exc: OSError, done: str = "") -> OctobrainError:
    """The error for a write of `path` that failed with `exc` (`done`: what was left, said
    after it): `InvalidInput` naming `field` when the path is at fault (no such folder, no
    permission), a `StorageError` when the disk is: the command line gives it is a failure
    (exit 1), not a mistake (exit 2)."""
    rule = f"cannot write {path}: {exc.strerror or exc}{done}"
    if exc.errno in _DISK_FAULTS:
        return StorageError(f"{field}: {rule}")
    return InvalidInput(field, rule)


def write_atomic_file(path: Path, text: str, field: str) -> None:
    """Write `text` to `path` atomically (a new file moved over it, keeping its mode; through
    a symlink to its target); failures name `field` and leave nothing behind, a Ctrl-C or
    SIGTERM during the write too (the new file removed, the old one whole). What is there and
    not a regular file (a device, a pipe) is refused: moved over, `/dev/null` itself was
    replaced."""
    target = replaced_by_write(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise cannot_write(field, path, exc) from None
    if mode is not None and not stat.S_ISREG(mode):
        raise InvalidInput(field, f"{path} is not a regular file; nothing written")
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "must be valid Unicode; nothing written") from None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_then_move(target, data, mode=None if mode is None else stat.S_IMODE(mode))
    except OSError as exc:
        raise cannot_write(field, path, exc) from None


def drop_dead_leftovers(target: Path, suffix: str) -> None:
    """Remove what writers of `target` killed before their end left beside it
    (`.<name>.<pid><suffix>`, or `.<name>.<pid>.<more><suffix>`, of a process that is gone):
    nothing else ever removes it. POSIX
    only: elsewhere a signal 0 is no question of whether a process is alive."""
    if os.name != "posix":
        return
    import glob

    for left in target.parent.glob(f".{glob.escape(target.name)}.*{glob.escape(suffix)}"):
        pid = left.name[len(target.name) + 2 : -len(suffix)].split(".", 1)[0]
        if writer_gone(pid):  # its write never finished
            with contextlib.suppress(OSError):
                left.unlink()


def writer_gone(pid: str) -> bool:
    """Whether the process `pid` (a number a leftover's name holds) is gone: False for this
    process, one alive (another user's too), a name that holds no such number, and off POSIX."""
    if os.name != "posix" or not pid.isdigit() or pid == str(os.getpid()):
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        pass
    return False


def replace_whole(target: Path, data: bytes, *, sync: bool = False) -> None:
    """Write `data` to `target` whole or not at all: to `.<name>.<pid>.tmp` beside it, then
    moved over it (`sync`: made durable first). The new file is removed when the write fails
    or is interrupted, and what writers killed mid-write left is removed first."""
    drop_dead_leftovers(target, ".tmp")
    _write_then_move(target, data, sync=sync)


def _write_then_move(
    target: Path, data: bytes, *, sync: bool = False, mode: int | None = None
) -> None:
    """`data` to `.<name>.<pid>.tmp` beside `target` (`mode`: its permission bits; `sync`:
    made durable), then moved over `target`; the new file removed when anything fails or
    interrupts the write, and the exception raised as it was."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
