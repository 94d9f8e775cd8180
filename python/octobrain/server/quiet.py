"""Warnings a flood of clients could repeat without end: a refused request, a connection closed
to make room. Each is logged at most `lines` times in `seconds`; past that the rest are counted,
and the count is said with the next line logged. A line each, ~250 bytes, with nothing bounding
them, took all the disk a log file was given, or filled a pipe its reader did not drain (64 kB),
after which the server, writing, answered nobody."""

from __future__ import annotations

import logging
import time


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

    def warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._window >= self._seconds:
            self._window, self._said = now, 0
        if self._said >= self._lines:
            if not self._unsaid and self._unsaid_line:
                self._log.warning(self._unsaid_line)
            self._unsaid += 1
            return
        self._said += 1
        if self._unsaid:
            self._log.warning(self._since_line, self._unsaid)
            self._unsaid = 0
        self._log.warning(message, *args)
