"""Heading-aware parent/child chunking.

1. The text is split into sections at markdown headings (`#`…`######` at a line start, outside
   fenced code; in a markdown document also a paragraph underlined with `===` or `---`, as
   CommonMark reads a setext heading), keeping the heading path (`Guide > Install > Linux`).
   A heading with no text under it lives on in the headers of the sections nested under it;
   with none, the heading line is the section's text (a note or a checklist made only of
   headings is not lost).
   Sections with less text than 32 bytes, or than their heading path, are packed with their
   small neighbours, so the embedding work follows the text, however many headings it has.
2. A section body that fits in `chunk_size` bytes is one chunk (no parent).
3. A longer body is cut into parents of at most `parent_size` bytes, and each parent into
   children of about `chunk_size` bytes that overlap by `chunk_overlap` bytes. Every child lies
   inside its parent (upstream truncated the parent, so later children pointed at text that did
   not contain them).

With a token budget (`max_tokens` and the embedding model's `count_tokens`), a chunk is also cut
short enough that its header and text fit in the model's input window: the model silently drops
what lies beyond it (all-MiniLM-L6-v2 reads 256 tokens, and 1,200 bytes of scientific text plus
a title often run past that), so a longer chunk's tail would be keyword-searchable but invisible
to the vector leg.

Cuts are `octobrain.spans`': a paragraph break, then a sentence end, a line break, a space,
within the last fifth of the window, never inside a UTF-8 character.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from octobrain.errors import InvalidInput
from octobrain.safe_text import shows_something
from octobrain.spans import Fits, split_spans

# One pass over the line; the closing hashes are stripped in Python (`heading_text`). A lazy
# group before optional trailing runs took cubic time on "# a" + spaces + "x": 82 s at 4 kB.
_HEADING = re.compile(rb"^(#{1,6})[ \t]+(.*)$")
_FENCE = re.compile(rb"^[ \t]*(```|~~~)")
_EOL = re.compile(rb"\r\n|[\r\n]")
# A line ending before a line that may be a fence or a heading (a pattern that starts with
# a line ending is searched for in C; one that starts with `^` is tried at every byte).
_MARKED = re.compile(rb"[\r\n](?=#|[ \t]*(?:```|~~~))")
# Setext headings (CommonMark): a paragraph, then a line of only `=` (level 1) or only `-`
# (level 2), indented at most 3 spaces. In a markdown document the underlines are marked too.
_UNDERLINE = re.compile(rb" {0,3}(=+|-+)[ \t]*")
_MARKED_SETEXT = re.compile(rb"[\r\n](?=#|[ \t]*(?:```|~~~)| {0,3}(?:=+|-+)[ \t]*(?:[\r\n]|\Z))")
# A blank line (its line ending before it): the last one before an underline starts its
# paragraph.
_BLANK = re.compile(rb"(?:\r\n|\r(?!\n)|\n)[ \t]*(?=[\r\n])")
# A line that opens a container (a list item, a block quote) or an indented code block: an
# underline after a paragraph in one is a thematic break, not a heading (CommonMark).
_NOT_PARAGRAPH = re.compile(rb" {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t\r\n]|\Z)| {0,3}>| {4}|\t")
_CONTAINER_LINE = re.compile(rb"[\r\n] {0,3}(?:(?:[-+*]|\d{1,9}[.)])[ \t\r\n]|>)")
# YAML front matter (Jekyll, Hugo, MkDocs): a `---` first line, up to a `---` or `...` line.
_FRONT_MATTER = re.compile(
    rb"---[ \t]*(?:\r\n|\r|\n)[A-Za-z0-9_][\w .-]*:.*?(?:\r\n|\r|\n)(?:---|\.\.\.)[ \t]*"
    rb"(?:\r\n|\r|\n|\Z)",
    re.DOTALL,
)


class TooManyChunks(Exception):
    """A document makes more than `chunk_text`'s `max_chunks` (found before it is all cut)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} chunks")
        self.limit = limit


@dataclass(frozen=True)
class Chunk:
    """One child chunk. Offsets are UTF-8 byte offsets into the document text."""

    index: int
    section_path: tuple[str, ...]
    header: str  # "Title > Section > Sub", printed before the text
    body: str
    parent: str  # the enclosing parent section's text (no header); "" when the chunk is whole
    start: int
    end: int

    @property
    def content(self) -> str:
        """What is embedded and keyword-indexed: the header line, then the text."""
        return f"{self.header}\n\n{self.body}"


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]
    start: int  # byte offset of the body
    body: bytes
    head_start: int = 0  # byte offset of the heading line
    head: bytes = b""  # the heading line without its line ending; b"" before the first heading

    @property
    def whole(self) -> tuple[int, int]:
        """Where the section lies, its heading line included: sections tile the document."""
        return (self.head_start if self.head else self.start), self.start + len(self.body)

    def holds(self, other: _Section) -> bool:
        """Whether `other` is nested under this section's heading (so its header names it)."""
        depth = len(self.path)
        return len(other.path) > depth and other.path[:depth] == self.path


def check_sizes(chunk_size: int, overlap: int, parent_size: int) -> None:
    """The rules the config enforces, for direct callers."""
    if chunk_size < 1:
        raise InvalidInput("chunk_size", "must be >= 1")
    if not 0 <= overlap < chunk_size:
        raise InvalidInput("chunk_overlap", "must be >= 0 and less than chunk_size")
    if parent_size < chunk_size:
        raise InvalidInput("parent_size", "must be >= chunk_size")


def _sections(data: bytes, setext: bool = False) -> Iterator[_Section]:
    """The sections of `data`, one at a time (a 50 MB file of heading lines was 13 million
    line objects and sections before the first chunk). Only the lines that may open or close
    a fence or be a heading are read: the 250,000 short lines of a 6 MB log were each read
    and matched twice in Python for none. With `setext` (a markdown document), a paragraph
    underlined with `=` or `-` is a heading too, and front matter holds none."""
    path: list[str] = []
    body_start = head_start = 0
    head = b""
    fenced = False
    floor = front_matter_end(data) if setext else 0  # where the next paragraph may start
    for pos in _marked_lines(data, setext):
        if pos < floor:
            continue
        eol = _EOL.search(data, pos)
        end = len(data) if eol is None else eol.end()
        bare = data[pos : end if eol is None else eol.start()]
        if _FENCE.match(bare):
            fenced = not fenced
            floor = end
        if fenced:
            continue
        level, heading, start = _heading(data, bare, floor, pos, setext)
        if heading:
            yield _Section(tuple(path), body_start, data[body_start:start], head_start, head)
            path = [*path[: level - 1], _path_name(heading)]
            body_start = end
            head_start, head = start, data[start : pos + len(bare)]
        if heading or level:
            floor = end
    yield _Section(tuple(path), body_start, data[body_start:], head_start, head)


# The most characters of a heading in a section path, as of a title (`extract._title`): a
# heading is a line of a few words. The path heads each of its section's chunks, so a heading
# line of 300 kB over 2 MB of text was 500 MB of chunk headers to embed and store (5 MB:
# gigabytes, the process killed); its text is still the line itself.
HEADING_CHARS = 200


def _path_name(heading: bytes) -> str:
    """A heading's name in a section path: at most `HEADING_CHARS` characters, `…` ending
    one cut short."""
    name = heading[: 4 * HEADING_CHARS + 4].decode("utf-8", "replace").strip()
    return name if len(name) <= HEADING_CHARS else name[: HEADING_CHARS - 1].rstrip() + "…"


def _heading(
    data: bytes, bare: bytes, floor: int, pos: int, setext: bool
) -> tuple[int, bytes, int]:
    """The heading the line `bare` at `pos` ends: its level, its text (b"" when the line ends
    none) and where it starts. A setext underline's level is given even when no paragraph
    precedes it (a thematic break), so the next paragraph starts after it."""
    match = _HEADING.match(bare)
    if match:
        heading = heading_text(match.group(2))
        if not shows_something(heading.decode("utf-8", "replace")):
            heading = b""  # `# ` and a zero-width space: no heading, as `#` alone is none
        return (len(match.group(1)) if heading else 0), heading, pos
    underline = _UNDERLINE.fullmatch(bare) if setext else None
    if underline is None:
        return 0, b"", pos
    level = 1 if underline.group(1)[:1] == b"=" else 2
    start = floor
    for blank in _BLANK.finditer(data, max(floor - 1, 0), pos):  # (once: the floor moves on)
        start = blank.end() + (2 if data[blank.end() : blank.end() + 2] == b"\r\n" else 1)
    inside = _NOT_PARAGRAPH.match(data, start) or _CONTAINER_LINE.search(data, start, pos)
    heading = b" ".join(data[start:pos].split())
    if start >= pos or inside or not shows_something(heading.decode("utf-8", "replace")):
        return level, b"", pos
    return level, heading, start


def front_matter_end(data: bytes) -> int:
    """Where a markdown document's YAML front matter ends (0 when it has none)."""
    if not data.startswith(b"---"):
        return 0
    found = _FRONT_MATTER.match(data)
    return 0 if found is None else found.end()


def first_heading(data: bytes, setext: bool = False) -> str:
    """The text of the first heading of `data` ("" when it has none)."""
    for section in _sections(data, setext):
        if section.head:
            return section.path[-1]
    return ""


def _marked_lines(data: bytes, setext: bool) -> Iterator[int]:
    """The offsets of the lines that may be a fence (blanks, then ``` or ~~~) or a heading
    (a `#` first; with `setext`, an underline too), and of the first line: the only lines
    `_sections` reads. Lines end as `bytes.splitlines` ends them: at "\r\n", "\r" or "\n"."""
    yield 0
    for found in (_MARKED_SETEXT if setext else _MARKED).finditer(data):
        yield found.end()


def heading_text(rest: bytes) -> bytes:
    """A markdown heading's text from what follows its `#`s and space: without the trailing
    blanks, nor a closing run of `#` (`## Setup ##`) when a blank precedes it (`# C#` keeps
    its `#`)."""
    text = rest.rstrip(b" \t")
    body = text.rstrip(b"#")
    if body != text and (not body or body[-1:] in (b" ", b"\t")):
        text = body.rstrip(b" \t")
    return text


def chunk_text(
    text: str,
    title: str,
    *,
    chunk_size: int = 1200,
    overlap: int = 300,
    parent_size: int = 4800,
    max_tokens: int = 0,
    count_tokens: Callable[[str], int] | None = None,
    max_chunks: int | None = None,
    setext: bool = False,
) -> list[Chunk]:
    """Chunk a document's text (see the module docstring). A section without text is skipped
    when a section nested under it follows (its header names the heading); otherwise its
    heading line is its text, so a note that is only `# Rotate keys monthly`, or a checklist
    of headings, is found.

    With `max_tokens` > 0 and `count_tokens` (the embedding model's count of a text, special
    tokens included), every chunk's `content` also fits in `max_tokens`: a header is cut to
    half of it, and a chunk's text is cut short (never below a sixteenth of `chunk_size`).

    With `max_chunks`, a document that makes more raises `TooManyChunks` as soon as it does,
    so a refused document costs about what the accepted part would. With `setext` (a markdown
    document), underlined paragraphs are headings too, and its front matter holds none."""
    check_sizes(chunk_size, overlap, parent_size)
    budget = count_tokens if max_tokens > 0 else None
    data = text.encode("utf-8")
    chunks: list[Chunk] = []
    for path, own_start, own in _units(data, _sections(data, setext), chunk_size):
        if max_chunks is not None and len(chunks) > max_chunks:
            raise TooManyChunks(max_chunks)
        lead = len(own) - len(own.lstrip())
        body = own.strip()
        base = own_start + lead
        # The document title leads the header, unless the first heading repeats it.
        lead_path = path[1:] if path[:1] == (title,) else path
        header = _header(" > ".join((title, *lead_path)), max_tokens, budget)
        fits = _budget(header, max_tokens, budget)
        if len(body) <= chunk_size and (fits is None or fits(body.decode())):
            chunks.append(
                Chunk(len(chunks), path, header, body.decode(), "", base, base + len(body))
            )
            continue
        for p_start, p_end in split_spans(body, parent_size, 0):
            parent = body[p_start:p_end]
            parent_text = parent.strip().decode()
            spans = split_spans(
                parent,
                chunk_size,
                overlap,
                None if fits is None else _window_fits(parent, fits),
            )
            for c_start, c_end in spans:
                piece = parent[c_start:c_end]
                stripped = piece.strip()
                if not stripped:
                    continue
                if max_chunks is not None and len(chunks) >= max_chunks:
                    raise TooManyChunks(max_chunks)  # (one section of 45 MB: all its chunks)
                offset = base + p_start + c_start + (len(piece) - len(piece.lstrip()))
                chunks.append(
                    Chunk(
                        len(chunks),
                        path,
                        header,
                        stripped.decode(),
                        parent_text if len(spans) > 1 else "",
                        offset,
                        offset + len(stripped),
                    )
                )
    if max_chunks is not None and len(chunks) > max_chunks:
        raise TooManyChunks(max_chunks)
    return chunks


Unit = tuple[tuple[str, ...], int, bytes]  # heading path, byte offset, text
MIN_TEXT = 32  # bytes of its own text a section needs for a chunk of its own


def _units(data: bytes, sections: Iterable[_Section], chunk_size: int) -> Iterator[Unit]:
    """The texts to chunk, in order: a section's body, or runs of small sections packed.

    A section whose text is shorter than `MIN_TEXT` bytes, or than its own heading path, is
    packed with the small sections next to it into one text of at most `chunk_size` bytes,
    their heading lines kept in it, under the heading path they share. A chunk's embedding
    then always pays for more of its own text than of its label: one section per chunk let a
    32 kB note of `# a` / `b` lines cost 5,400 chunks to embed, and a long heading over many
    one-line sections repeated in every one of them. Sections are read as they come, with
    the one after each in view (`_alone` needs it)."""
    run: list[_Section] = []
    for section, follows in _with_next(sections):
        if not section.head and not section.body.strip():
            continue  # blank text before the first heading
        label = len(" > ".join(section.path).encode())
        if len(section.body.strip()) < max(MIN_TEXT, label):
            if run and section.whole[1] - run[0].whole[0] > chunk_size:
                yield from _packed(data, run, section)
                run = []
            run.append(section)
            continue
        yield from _packed(data, run, section)
        run = []
        yield from _alone(section, follows)
    yield from _packed(data, run, None)


def _with_next(sections: Iterable[_Section]) -> Iterator[tuple[_Section, _Section | None]]:
    """Each section with the one after it (None after the last)."""
    previous: _Section | None = None
    for section in sections:
        if previous is not None:
            yield previous, section
        previous = section
    if previous is not None:
        yield previous, None


def _alone(section: _Section, follows: _Section | None) -> Iterator[Unit]:
    """One section's unit. A section without text is none when a section nested under it
    `follows` (whose header names it); otherwise its heading line is its text."""
    if section.body.strip():
        yield section.path, section.start, section.body
        return
    if section.head and (follows is None or not section.holds(follows)):
        yield section.path, section.head_start, section.head


def _packed(data: bytes, run: list[_Section], follows: _Section | None) -> Iterator[Unit]:
    """The unit of consecutive sections `run` (`follows` is the section after the last):
    under their common heading path, from the first one's heading line (its body, when that
    path is its own) to the last one's end."""
    if len(run) <= 1:  # one section (or none) is a unit as it stands
        for section in run:
            yield from _alone(section, follows)
        return
    first, last = run[0], run[-1]
    path = first.path
    for section in run[1:]:
        other = section.path
        keep = 0
        while keep < min(len(path), len(other)) and path[keep] == other[keep]:
            keep += 1
        path = path[:keep]
    start = first.start if path == first.path else first.whole[0]
    yield path, start, data[start : last.whole[1]]


def _header(header: str, max_tokens: int, count: Callable[[str], int] | None) -> str:
    """`header`, cut to its longest start (and `…`) that takes at most half the model's window:
    a header of long headings that filled the window left each chunk a few bytes of text."""
    if count is None or count(header) <= max_tokens // 2:
        return header
    lo, hi = 0, len(header)  # header[:lo] + "…" fits; header[:hi] + "…" does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(header[:mid] + "…") <= max_tokens // 2:
            lo = mid
        else:
            hi = mid
    return header[:lo].rstrip() + "…"


def _budget(
    header: str, max_tokens: int, count: Callable[[str], int] | None
) -> Callable[[str], bool] | None:
    """Whether a chunk body under `header` fits the model's window (None: no token budget)."""
    if count is None:
        return None
    return lambda body: count(f"{header}\n\n{body.strip()}") <= max_tokens


def _window_fits(data: bytes, fits: Callable[[str], bool]) -> Fits:
    """`fits` for byte windows of `data` (a window may end inside a character while searching)."""
    return lambda start, end: fits(data[start:end].decode("utf-8", "ignore"))
