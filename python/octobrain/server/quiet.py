"""Warnings a flood of clients could repeat without end: a refused request, a connection closed
to make room. Each is logged at most `lines` times in `seconds`; past that the rest are counted,
and the count is said with the next line logged. A line each, ~250 bytes, with nothing bounding
them, took all the disk a log file was given, or filled a pipe its reader did not drain (64 kB),
after which the server, writing, answered nobody."""

from __future__ import annotations

import logging
import threading
import time

_Line = tuple[str, tuple[object, ...]]  # a format and its arguments


class QuietWarning:
    """One kind of warning, logged to `log` at most `lines` times in any window of `seconds`.

    `unsaid` is the line said when the rest are counted from then on ("" says nothing), and
    `said_since` the line said with the next one logged, formatted with how many went unsaid."""

    def __init__(
        self, log: logging.Logger, lines: int, seconds: float, unsaid: str, said_since: str
    ) -> None:
        self._log = log
        self._lines, self._seconds = lines, seconds
        self._unsaid_line, self._since_line = unsaid, said_since
        self._window = -seconds
        self._said = 0
        self._unsaid = 0
        self._lock = threading.Lock()

    def warn(self, message: str, *args: object) -> None:
        # Counted under a lock, logged after it: the MCP server warns from its worker threads,
        # and a count read, logged and then reset lost or repeated what others counted meanwhile.
        with self._lock:
            lines = self._count(message, args)
        for line, line_args in lines:
            self._log.warning(line, *line_args)

    def _count(self, message: str, args: tuple[object, ...]) -> list[_Line]:
        """The lines this warning logs (none when it is counted instead)."""
        now = time.monotonic()
        if now - self._window >= self._seconds:
            self._window, self._said = now, 0
        if self._said >= self._lines:
            self._unsaid += 1
            if self._unsaid == 1 and self._unsaid_line:
                return [(self._unsaid_line, ())]
            return []
        self._said += 1
        lines: list[_Line] = []
        if self._unsaid:
            lines.append((self._since_line, (self._unsaid,)))
            self._unsaid = 0
        lines.append((message, args))
        return lines
