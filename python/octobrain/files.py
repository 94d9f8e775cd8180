"""Opening a file named by someone else (a config path, a hook's transcript, a knowledge
source) only when it is a regular file.

The check is made on the opened descriptor, not on the path before opening it: a name checked
first and opened after can be swapped in between. The open itself does not wait: opening a
FIFO for reading blocks until a writer comes, so the descriptor is opened non-blocking, checked,
and only then made blocking again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO

from octobrain.errors import InvalidInput

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "NotARegularFile",
    "TooLarge",
    "named_by",
    "open_regular",
    "read_regular",
    "replaced_by_write",
]


class NotARegularFile(OSError):
    """The path names a FIFO, socket, device or the like, not a regular file."""


class TooLarge(OSError):
    """The file holds more than the bytes asked for: `size` as its status gave it, or None
    when it grew past the bound while read."""

    def __init__(self, path: str | Path, size: int | None) -> None:
        super().__init__(f"{path} is over the size bound")
        self.size = size


def open_regular(path: str | Path) -> tuple[BinaryIO, os.stat_result]:
    """`path` opened for binary reading, with its status, when it is a regular file (symlinks
    followed). A directory raises `IsADirectoryError`, anything else that is not a regular file
    `NotARegularFile`; a missing or unreadable path the `OSError` of the open."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(status.st_mode):
            raise NotARegularFile(f"{path} is not a regular file")
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return handle, status


def read_regular(path: str | Path, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of `path`, with its status, when it is a regular file of at most `max_bytes`
    (`open_regular`'s errors; `TooLarge` past the bound, by its status or as it was read)."""
    handle, status = open_regular(path)
    with handle:
        if status.st_size > max_bytes:
            raise TooLarge(path, status.st_size)
        data = handle.read(max_bytes + 1)
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
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {path}: {exc.strerror or exc}") from None


def replaced_by_write(path: Path) -> Path:
    """The file a write that replaces `path` (a new file moved over it) should replace: a
    symlink's final target, so the link stays a link (a settings file kept in a dotfiles
    repository); `path` itself otherwise."""
    from pathlib import Path as _Path

    return _Path(os.path.realpath(path)) if os.path.islink(path) else path
