"""Progress lines of long commands (export, import, re-embedding, migrate, indexing, benchmarks),
drawn by tqdm.

For people, never in a script's way: on stderr only (stdout carries the answer, `--format json`
too). Where stderr is no terminal (a pipe, a log file) the label is written once, as a line, and
nothing more. On a terminal one line is redrawn after a carriage return, which even a `TERM=dumb`
terminal takes, and no escape sequence at all (click's bar hid the cursor with one, which a
`TERM=dumb` terminal printed as garbage and a killed command left hidden). The line stays
narrower than the terminal (`COLUMNS` when set): one that wraps is redrawn below itself, a new
screen line at every update. So the label is cut in its middle to leave the bar and the
percentage room, keeping the file name at its end.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from octobrain.safe_text import one_line, printable

# `label  [#####     ]  42%`: the bar takes what the label leaves, at most this many columns,
# and is left out below the least.
_WIDEST_BAR = 30
_NARROWEST_BAR = 10
_AROUND_BAR = len("  []  100%")


def terminal_columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to: `COLUMNS` when it is a number, else the
    terminal's own, else 80."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isascii() and columns.isdigit() and int(columns) > 0:
        return int(columns)
    with contextlib.suppress(AttributeError, OSError, ValueError):
        return os.get_terminal_size(stream.fileno()).columns or 80
    return 80


def _cut(label: str, width: int) -> str:
    """`label` in at most `width` characters: cut in the middle, its start and end kept (a
    wide character overflowing is trimmed by tqdm with the line's end)."""
    if len(label) <= width:
        return label
    if width <= len("..."):
        return label[:width]
    tail = (width - 3) // 2
    return label[: width - 3 - tail] + "..." + label[len(label) - tail :]


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A progress line on stderr, drawn at the first unit of work done (a refusal found before
    any is the only line printed) and ended once all is done. Called with a count of units
    done, as `update`."""

    def __init__(self, length: int, label: str) -> None:
        self.length = length
        self.pos = 0
        self.label = one_line(printable(label))  # (it may quote a path holding an ESC)
        self._stream = sys.stderr
        self._terminal = _is_terminal(self._stream)
        self._bar: Any = None  # the tqdm line, once drawn
        self._said = False

    def __call__(self, n: int) -> None:
        self.update(n)

    def update(self, n: int) -> None:
        """Count `n` more units done, and redraw the line."""
        self.pos += n
        if not self._terminal:
            if not self._said:
                self._said = True
                self._write(f"{self.label}\n")
            return
        if self._bar is None:
            if self._said:
                return  # (ended: all was done)
            self._bar = self._draw()
        self._bar.total = self.length
        self._bar.update(n)
        if self.pos >= self.length:
            self.finish()  # all done: the next line (another bar's, the answer) is its own

    def relabel(self, label: str) -> None:
        """Say `label` from now on (which conversation of an export is under way): a drawn
        line keeps its width, the new label cut or padded to the room the first one had."""
        self.label = one_line(printable(label))
        if self._bar is not None:
            room = len(self._bar.desc)
            self._bar.set_description_str(_cut(self.label, room).ljust(room), refresh=False)

    def _draw(self) -> Any:
        from tqdm import tqdm

        tqdm.monitor_interval = 0  # (no monitor thread for one line)
        room = terminal_columns(self._stream) - 1  # filling the last column wraps on some
        if room - _AROUND_BAR - _NARROWEST_BAR > 0:
            label = _cut(self.label, room - _AROUND_BAR - _NARROWEST_BAR)
            bar = min(_WIDEST_BAR, room - len(label) - _AROUND_BAR)
            shape = f"{{desc}}  [{{bar:{bar}}}]  {{percentage:3.0f}}%"
        else:  # too narrow for a bar: the label and the percentage
            label = _cut(self.label, max(room - len(" 100%"), 0))
            shape = "{desc} {percentage:3.0f}%" if label else "{percentage:3.0f}%"
        self._said = True
        return tqdm(
            total=self.length,
            desc=label,
            file=self._stream,
            ncols=room,
            ascii=" #",
            bar_format=shape,
            mininterval=0,
            position=0,  # (one line: never moved to with escape sequences)
            nrows=2,  # (tqdm hides a line past `nrows - 1`, and read -1 from a 0 x 0 terminal)
            leave=True,
        )

    def finish(self) -> None:
        """End a drawn line with a line break (also when the work failed or was interrupted:
        the error, or `Aborted!`, gets a line of its own)."""
        bar, self._bar = self._bar, None
        if bar is not None:
            with contextlib.suppress(OSError, ValueError):
                bar.close()

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
