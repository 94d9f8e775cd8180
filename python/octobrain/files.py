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
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotARegularFile", "open_regular"]


class NotARegularFile(OSError):
    """The path names a FIFO, socket, device or the like, not a regular file."""


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
