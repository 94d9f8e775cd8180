"""Where a library's warnings go: what logging's last resort does, made safe to print.

A library that logs without configuring logging (pypdf on a damaged PDF, for one) reaches
`logging.lastResort`, which writes the bare message to whatever `sys.stderr` is at that moment.
Two things go wrong with that. The message may quote the document (pypdf quotes what it could
not read), escape sequences included, straight onto the user's terminal. And in the resident
service, `sys.stderr` is the captured stderr of the command running now, so a warning raised by
a hosted MCP session's call landed in some other client's command output. `CallerStderr` prints
the message as the last resort would, without control characters, and in the service sends a
record from any thread but the running command's to the service's own log.
"""

from __future__ import annotations

import logging
import sys
import threading

from octobrain.safe_text import printable

__all__ = ["CallerStderr", "PrintableFormatter", "install"]


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


def install(elsewhere: logging.Handler | None = None) -> CallerStderr:
    """Put a `CallerStderr` on the root logger in place of any earlier one."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, CallerStderr)]:
        root.removeHandler(old)
    handler = CallerStderr(elsewhere)
    root.addHandler(handler)
    return handler
