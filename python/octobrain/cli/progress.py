"""Progress lines of long commands (export, import, re-embedding, migrate, indexing, benchmarks).

For people, never in a script's way: on stderr only (stdout carries the answer, `--format json`
too). Where stderr is no terminal (a pipe, a log file) the label is written once, as a line, and
nothing more. On a terminal one line is redrawn after a carriage return, which even a `TERM=dumb`
terminal takes, and no escape sequence at all: click's bar hid the cursor with one, which a
`TERM=dumb` terminal printed as garbage and a killed command left hidden. The line is cut to the
terminal's width (its label in the middle, keeping the file name at its end): a line that
wraps is redrawn below itself, a new screen line at every update.
"""

from __future__ import annotations

import contextlib
import os
import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from octobrain.safe_text import one_line, printable

_BAR = 30  # the widest bar drawn
_NARROWEST_BAR = 10  # narrower than this, the bar is left out: the label and the percentage
_CUT = "..."  # (ASCII: a stderr in any encoding can write it)


def _cells(text: str) -> int:
    """How many terminal columns `text` takes (a wide East Asian character takes two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _head(text: str, cells: int) -> str:
    """The longest start of `text` that fits in `cells` columns."""
    used = 0
    for i, ch in enumerate(text):
        used += _cells(ch)
        if used > cells:
            return text[:i]
    return text


def _fit(label: str, cells: int) -> str:
    """`label` in at most `cells` columns: cut in the middle, its start and its end kept."""
    if _cells(label) <= cells:
        return label
    if cells <= len(_CUT):
        return _head(label, cells)
    room = cells - len(_CUT)
    end = _head(label[::-1], room // 2)[::-1]
    return _head(label, room - _cells(end)) + _CUT + end


def terminal_columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to: `COLUMNS` when it is a number, else the
    terminal's own, else 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isascii() and columns.isdigit() and int(columns) > 0:
        return int(columns)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        return os.get_terminal_size(stream.fileno()).columns or 80
    return 80


def progress_line(label: str, done: int, total: int, columns: int) -> str:
    """The line drawn for `done` of `total`, `label  [#####     ]   42%`, in at most
    `columns - 1` columns: a line that fills the last one wraps on some terminals."""
    share = min(done, total) / total if total > 0 else 1.0
    percent = f"{int(share * 100):>3}%"
    room = columns - 1
    bar = min(_BAR, room - _cells(label) - len(percent) - 6)  # (6: "  [", "]  ")
    if bar >= _NARROWEST_BAR:
        filled = int(bar * share)
        return f"{label}  [{'#' * filled}{' ' * (bar - filled)}]  {percent}"
    shown = _fit(label, room - len(percent) - 1)
    return _head(f"{shown} {percent}" if shown else percent.lstrip(), room)


class Progress:
    """A progress line on stderr, drawn at the first unit of work done (a refusal found before
    any is the only line printed). Called with a count of units done, as `update`."""

    def __init__(self, length: int, label: str) -> None:
        self.length = length
        self.pos = 0
        self.label = one_line(printable(label))  # (it may quote a path holding an ESC)
        self._stream = sys.stderr
        try:
            self._terminal = self._stream.isatty()
        except (AttributeError, ValueError):
            self._terminal = False
        self._drawn: str | None = None  # what the screen shows of this line; None: nothing yet

    def __call__(self, n: int) -> None:
        self.update(n)

    def update(self, n: int) -> None:
        """Count `n` more units done, and redraw the line if what it shows changed."""
        self.pos += n
        if not self._terminal:
            if self._drawn is None:
                self._drawn = self.label
                self._write(f"{self.label}\n")
            return
        columns = terminal_columns(self._stream)
        line = progress_line(self.label, self.pos, self.length, columns)
        if line != self._drawn:
            # Blanks over what the last line showed beyond this one, within the terminal.
            left = min(_cells(self._drawn or ""), columns - 1) - _cells(line)
            self._drawn = line
            self._write(f"\r{line}{' ' * max(0, left)}")

    def finish(self) -> None:
        """End a drawn line with a line break (also when the work failed or was interrupted:
        the error, or `Aborted!`, gets a line of its own)."""
        if self._terminal and self._drawn is not None:
            self._write("\n")

    def _write(self, text: str) -> None:
        # A progress line that cannot be written (stderr closed, a full disk) fails no work.
        with contextlib.suppress(OSError, ValueError):
            self._stream.write(text)
            self._stream.flush()


@contextmanager
def progress_bar(length: int, label: str) -> Iterator[Progress]:
    """A `Progress` of `length` units, ended however the work ends."""
    bar = Progress(length, label)
    try:
        yield bar
    finally:
        bar.finish()


@contextmanager
def progress_of_total(label: str) -> Iterator[Callable[[int, int], None]]:
    """A `(done, total)` progress callback that draws a line once the work takes more than one
    step (a document embedded in one batch draws none)."""
    bar: Progress | None = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            if done >= total:
                return
            bar = Progress(total, label)
        bar.length = total
        bar.update(done - bar.pos)

    try:
        yield update
    finally:
        if bar is not None:
            bar.finish()
