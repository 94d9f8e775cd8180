"""Bounded views of extracted text: a page of whole lines for `read`, a window of a long line
for `match`. Lines are counted as `match` counts them (the Rust kernel's rule: split on "\\n",
a trailing "\\r" dropped, a final "\\n" adds no line), so a line number from `match` is the
`from_line` that starts a `read` page there."""

from __future__ import annotations

from dataclasses import dataclass

from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import integer_of
from octobrain.knowledge.extract import Document

LINE_CHARS = 400  # the most of one line `match` shows: a window around the match
ELLIPSIS = "…"


@dataclass(frozen=True)
class ReadPage:
    """Lines `first_line`..`last_line` of a document's `total_lines` (counted from 1): `text`,
    their `shown_bytes` of UTF-8 joined by newlines, at most `max_bytes`; `cut` when the page
    is one line longer than that, shown up to the bound."""

    uri: str
    title: str
    doc_type: str
    text: str
    first_line: int
    last_line: int
    total_lines: int
    shown_bytes: int
    total_bytes: int
    cut: bool
    max_bytes: int | None
    first_byte: int = 0  # where in its first line the page starts (bytes of UTF-8)
    line_bytes: int = 0  # when `cut`: the bytes of the line cut

    @property
    def whole(self) -> bool:
        """The page is the whole text."""
        return (
            self.first_line == 1
            and self.first_byte == 0
            and self.last_line == self.total_lines
            and not self.cut
        )

    @property
    def next_byte(self) -> int | None:
        """Where in the line cut the next page starts, or None when no line was cut."""
        return self.first_byte + self.shown_bytes if self.cut else None

    @property
    def next_line(self) -> int | None:
        """Where the next page starts, or None at the end."""
        if self.cut:
            return self.first_line
        return self.last_line + 1 if self.last_line < self.total_lines else None


def split_lines(text: str) -> list[str]:
    """The lines of `text` as `match` numbers them."""
    if not text:
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def check_line(value: object) -> int:
    """A `from_line`: an integer from 1 (whether the text has that line is `page`'s check);
    `2.0` is 2, as `limit` takes it (`integer_of`)."""
    number = integer_of(value, 1)
    if number is None:
        raise InvalidInput("from_line", f"must be an integer ≥ 1, got {as_json(value)}")
    return number


def check_byte(value: object) -> int:
    """A `from_byte`: an integer from 0 (whether the line is that long is `page`'s check)."""
    number = integer_of(value, 0)
    if number is None:
        raise InvalidInput("from_byte", f"must be an integer ≥ 0, got {as_json(value)}")
    return number


def page(
    doc: Document, from_line: object = 1, max_bytes: int | None = None, from_byte: object = 0
) -> ReadPage:
    """The page of `doc` that starts at line `from_line` and holds as many whole lines as fit
    in `max_bytes` of UTF-8, the newlines between them counted (None: no bound). The first
    line always shows, cut at the bound when it alone is longer; the rest of a line cut is
    read from `from_byte` (its bytes shown so far, what the page cut names; a page never
    starts inside a character). Only the page's lines are cut out of the text (the lines
    before it are counted in blocks): a list of every line of a 50 MB file took 4 s for each
    64 KiB page."""
    start = check_line(from_line)
    skip = check_byte(from_byte)
    text = doc.text
    body = text[:-1] if text.endswith("\n") else text  # (as `split_lines` counts)
    total = body.count("\n") + 1 if text else 0
    if start > max(total, 1):
        raise InvalidInput(
            "from_line", f"is past the end: the text has {total} line{'s' * (total != 1)}"
        )
    shown: list[str] = []
    used = 0  # the UTF-8 bytes of the page so far, newlines between its lines included
    cut = False
    line_bytes = 0
    at = _line_start(body, start - 1)
    for _ in range(total - start + 1):
        end = body.find("\n", at)
        end = len(body) if end < 0 else end
        line = body[at:end]
        line = line[:-1] if line.endswith("\r") else line
        at = end + 1
        if skip and not shown:  # the rest of a line a page cut
            raw = line.encode("utf-8")
            if skip >= len(raw):
                raise InvalidInput(
                    "from_byte", f"is past the end of line {start}: it has {len(raw):,} bytes"
                )
            line_bytes = len(raw)
            line = raw[skip:].decode("utf-8", "ignore")  # (a character's tail is dropped)
            skip = line_bytes - len(line.encode("utf-8"))
        size = len(line.encode("utf-8")) + (1 if shown else 0)
        if max_bytes is not None and used + size > max_bytes:
            if not shown:  # one line longer than a page: its head, up to the bound
                head = line.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
                shown.append(head)
                used = len(head.encode("utf-8"))
                line_bytes = line_bytes or len(line.encode("utf-8"))
                cut = True
            break
        shown.append(line)
        used += size
    return ReadPage(
        doc.uri,
        doc.title,
        doc.doc_type.value,
        "\n".join(shown),
        start,
        start - 1 + len(shown),
        total,
        used,
        len(text.encode("utf-8")),
        cut,
        max_bytes,
        skip,
        line_bytes if cut else 0,
    )


_BLOCK = 1 << 20  # characters whose line breaks are counted at once


def _line_start(body: str, lines: int) -> int:
    """Where line `lines` (from 0) of `body` starts: past that many "\n", counted a block at
    a time."""
    at = 0
    while lines:
        end = min(at + _BLOCK, len(body))
        found = body.count("\n", at, end)
        if found < lines and end < len(body):
            lines -= found
            at = end
            continue
        for _ in range(lines):
            at = body.index("\n", at) + 1
        break
    return at


def clip(line: str, start: int, end: int, width: int = LINE_CHARS) -> tuple[str, int, int]:
    """`line` if it has at most `width` characters, else a `width`-character window around
    `start`..`end` (the match) marked with "…" where cut; with the match's span in it."""
    if len(line) <= width:
        return line, start, end
    lo = max(0, min(start - (width - min(end - start, width)) // 2, len(line) - width))
    hi = lo + width
    shown = line[lo:hi]
    head = ELLIPSIS if lo > 0 else ""
    tail = ELLIPSIS if hi < len(line) else ""
    offset = len(head) - lo
    return head + shown + tail, max(start + offset, len(head)), min(end + offset, len(head) + width)


def clip_context(line: str, width: int = LINE_CHARS) -> str:
    """A context line of `match`: its first `width` characters, "…" when cut."""
    return line if len(line) <= width else line[:width] + ELLIPSIS
