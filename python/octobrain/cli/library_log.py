"""Where a library's warnings go: what logging's last resort does, made safe to print.

A library that logs without configuring logging (pypdf on a damaged PDF, for one) reaches
`logging.lastResort`, which writes the bare message to whatever `sys.stderr` is at that moment.
Two things go wrong with that. The message may quote the document (pypdf quotes what it could
not read), escape sequences included, straight onto the user's terminal. And in the resident
service, `sys.stderr` is the captured stderr of the command running now, so a warning raised by
a hosted MCP session's call landed in some other client's command output. `CallerStderr` prints
the message as the last resort would, without control characters, and in the service sends a
record from any thread but the running command's to the service's own log, which `CappedLog`
keeps within `LOG_BYTES`.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
from typing import TextIO

from octobrain.safe_text import printable

__all__ = ["LOG_BYTES", "CallerStderr", "CappedLog", "PrintableFormatter", "install"]

LOG_BYTES = 8 << 20  # the service's log file keeps at most this much: past it, it starts again


class CallerStderr(logging.Handler):
    """Warnings and worse, as their message alone, on the current `sys.stderr` (see above)."""

    def __init__(self, elsewhere: logging.Handler | None = None) -> None:
        super().__init__(logging.WARNING)
        self.elsewhere = elsewhere  # the service's log, for threads that run no command
        self.command_thread: int | None = None  # the thread whose stderr is the caller's

    def emit(self, record: logging.LogRecord) -> None:
        if self.elsewhere is not None and threading.get_ident() != self.command_thread:
            self.elsewhere.handle(record)
            return
        try:
            sys.stderr.write(printable(record.getMessage()) + "\n")
        except Exception:
            self.handleError(record)


class PrintableFormatter(logging.Formatter):
    """A formatter whose lines carry no terminal control characters (the server's log)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


class CappedLog(logging.StreamHandler):  # type: ignore[type-arg]
    """The service's own log, its stderr: past `limit` bytes the file starts again, with a line
    saying so. A service lives as long as its clients keep it busy and logs what they cause
    (refusals are rate-limited, an unforeseen error's traceback is not), and nothing else ever
    shortened the file. Writes go to the file's end (`O_APPEND`, set here on the descriptor
    the service was started with), so after a cut they start at its beginning, not after a
    hole as long as what was cut. A stream that is no regular file is written as it is."""

    def __init__(self, stream: TextIO, limit: int = LOG_BYTES) -> None:
        super().__init__(stream)
        self.limit = limit
        self._fd: int | None = None
        try:
            import fcntl  # (POSIX, as the service is)

            fd = stream.fileno()
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
                self._fd = fd
        except (ImportError, OSError, ValueError):  # (io.UnsupportedOperation is a ValueError)
            pass

    def emit(self, record: logging.LogRecord) -> None:
        if self._fd is not None:
            try:
                if os.fstat(self._fd).st_size >= self.limit:
                    self.flush()
                    os.ftruncate(self._fd, 0)
                    self.stream.write(f"(log cut at {self.limit:,} bytes; what follows is newer)\n")
            except OSError:
                pass  # (the record is still written)
        super().emit(record)


def install(elsewhere: logging.Handler | None = None) -> CallerStderr:
    """Put a `CallerStderr` on the root logger in place of any earlier one."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, CallerStderr)]:
        root.removeHandler(old)
    handler = CallerStderr(elsewhere)
    root.addHandler(handler)
    return handler
