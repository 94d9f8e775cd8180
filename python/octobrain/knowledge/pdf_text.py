"""PDF text: what pypdf extracts from a PDF's pages, made to read as the pages do.

What a typeset page adds to its text is taken back out: the running header and footer repeated
on every page (`_drop_running_lines`), the hyphen that breaks a word at a line end or at a
page's end (`_join_hyphenated`), ligature characters (`ﬁ` → `fi`), a symbol font's private
bullet glyph (`\uf0b7`) read as the bullet it shows (`•`); and the document's bookmarks (its
outline) mark their headings as `#` lines, so its chunks get section paths (`_mark_outline`).
Each page's own text, its footnote numbers and table cells, is read in `pdf_pieces.py`.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter, deque
from typing import Any

log = logging.getLogger(__name__)


def tidy(reader: Any, pages: list[str]) -> str:
    """The text of a PDF's pages (pypdf's `PdfReader` and each page's extracted text), as
    its pages read, apart by a blank line (a line break, where a sentence runs on to the
    next); a page's footnotes (`[^1]: …`, `pdf_pieces.py`) after its text, or after the
    sentence its page break cut."""
    apart = [
        _notes_apart(_PRIVATE_BULLET.sub("\\1\u2022", page.translate(_LIGATURES))) for page in pages
    ]
    lines = _drop_running_lines([body for body, _ in apart])
    _mark_outline(reader, lines)
    texts: list[str] = []
    notes: list[list[str]] = []
    for page, (_, page_notes) in zip(lines, apart, strict=True):
        if text := "\n".join(page).strip():
            texts.append(text)
            notes.append(page_notes)
        elif notes:
            notes[-1].extend(page_notes)
        else:
            texts.append("")
            notes.append(page_notes)
    out: list[str] = []
    held: list[str] = []
    for text, page_notes, nxt in zip(texts, notes, [*texts[1:], ""], strict=True):
        if held:
            text, held = _after_sentence(text, held)
        held += page_notes
        if nxt[:1].islower():  # a sentence runs on to the next page
            out.append(text + "\n")
        else:
            out.append("\n\n".join(part for part in (text, "\n".join(held)) if part) + "\n\n")
            held = []
    return _join_hyphenated("".join(out).strip("\n"))


# A footnote line `pdf_pieces` puts after a page's text.
_NOTE_LINE = re.compile(r"\[\^[^\]\s]{1,3}\]: [^\n]*")
# A line that ends a sentence (its closing quote or bracket with it).
_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d\u2019]*[ \t]*$", re.MULTILINE)


def _notes_apart(page: str) -> tuple[list[str], list[str]]:
    """A page's lines and its footnote lines (the note lines that end it, after its first
    line), apart. Read from the end, line by line: a pattern for the run of note lines at
    the end was tried from each note line and read on to the page's end (quadratic: 8,000
    lines like `[^1]: a` and a line of text took 1.9 s, 40,000, 320 kB, minutes)."""
    lines = page.split("\n")
    first = len(lines)
    while first > 1 and _NOTE_LINE.fullmatch(lines[first - 1]):
        first -= 1
    if first == len(lines):
        return page.splitlines(), []
    return "\n".join(lines[:first]).splitlines(), lines[first:]


def _after_sentence(text: str, notes: list[str]) -> tuple[str, list[str]]:
    """`text` with `notes` after its first line that ends a sentence, and the notes left
    over (all of them, when no line of it ends one)."""
    end = _SENTENCE_END.search(text)
    if end is None:
        return text, notes
    rest = text[end.end() :].strip("\n")
    return "\n\n".join(part for part in (text[: end.end()], "\n".join(notes), rest) if part), []


# A character of Unicode's private use area before a list item's text: the bullet of a symbol
# font (Symbol's U+F0B7, OpenSymbol's U+F095, …) that its font maps to no Unicode bullet.
_PRIVATE_BULLET = re.compile(r"(?<![^\n])([ \t]*)[\ue000-\uf8ff](?=[ \t])")
# A page that ends in a word broken by a hyphen: the next page holds the rest of the word.
_RUNS_ON = re.compile(r"[^\W\d_][-\u2010\u00ad]\Z")


# The Latin ligatures of Unicode's presentation forms (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ), as their letters: a
# typeset PDF maps its ligature glyphs to them, and `match 'office'` did not find `ofﬁce`.
_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}

# How many lines at the top and at the bottom of a page may be its running header or footer.
_EDGE_LINES = 2
_NUMBER = re.compile(r"\d+")


def _edge_keys(line: str, index: int) -> frozenset[str]:
    """What makes `line` the same on another page: its words, or its words with a number that
    counts the pages (the page's index plus the same offset on each page: `Page 3 of 9` on
    the third page is `Page 4 of 9` on the fourth, `Line 51` and `Line 101` are not)."""
    words = " ".join(line.split())
    keys = {words}
    for number in list(_NUMBER.finditer(words))[:3]:
        offset = int(number.group()) - index if len(number.group()) < 6 else None
        keys.add(f"{words[: number.start()]}#{words[number.end() :]}\0{offset}")
    return frozenset(keys)


def _drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """The pages' lines without their running header and footer: a line among the first or
    last `_EDGE_LINES` of a page, the same (its page number aside) on at least 3 pages and on
    half of those with text. A page's only line is its text, not a header."""
    edges = [_edge_lines(page, index) for index, page in enumerate(pages)]
    counts = Counter(key for edge in edges for key in frozenset().union(*edge.values()))
    with_text = sum(1 for page in pages if any(line.strip() for line in page))
    running = {key for key, n in counts.items() if n >= 3 and 2 * n >= with_text}
    if not running:
        return pages
    return [
        [line for at, line in enumerate(page) if not edge.get(at, frozenset()) & running]
        for page, edge in zip(pages, edges, strict=True)
    ]


def _edge_lines(page: list[str], index: int) -> dict[int, frozenset[str]]:
    """The keys of the first and last `_EDGE_LINES` lines of a page with text, by place."""
    places = [at for at, line in enumerate(page) if line.strip()]
    if len(places) < 2:
        return {}
    edge = places[:_EDGE_LINES] + places[-_EDGE_LINES:]
    return {at: _edge_keys(page[at], index) for at in edge}


# The most bookmarks an outline is read with (pypdf's `outline_maximum_entries`, 100,000 by
# default): pypdf builds each in about 0.2 ms and 6 kB, after the pages, outside `PDF_SECONDS`
# (100,000 in an 11 MB PDF took 21 s and 570 MB). A long manual's outline lists a few thousand.
PDF_BOOKMARKS = 20_000


def _mark_outline(reader: Any, pages: list[list[str]]) -> None:
    """Make each bookmark's heading a `#` line (one `#` per outline level) where a line of its
    page reads as the bookmark's title. A broken outline marks nothing, nor does one of more
    than `PDF_BOOKMARKS` bookmarks."""
    from pypdf import apply_configuration

    try:
        with apply_configuration(outline_maximum_entries=PDF_BOOKMARKS):
            entries = list(_outline(reader, reader.outline, 1))
    except Exception as exc:  # a damaged outline: the text is still good
        log.info("the PDF's outline is not read: %s", exc)
        return
    # Each page's lines by their words, read once: looked for line by line for each
    # bookmark, 10,000 bookmarks of a page of 10,000 lines (1.2 MB) took 19 s.
    places: dict[int, dict[str, deque[int]]] = {}
    for title, level, number in entries:
        if number is None or not 0 <= number < len(pages) or not title:
            continue
        if number not in places:
            places[number] = {}
            for at, line in enumerate(pages[number]):
                places[number].setdefault(" ".join(line.split()), deque()).append(at)
        found = places[number].get(title)
        if found:  # (the first line of its title not yet a bookmark's)
            pages[number][found.popleft()] = "#" * level + " " + title


def _outline(reader: Any, outline: list[Any], level: int) -> Any:
    """(title, level, page index or None) of each bookmark in `outline`, depth first."""
    for entry in outline:
        if isinstance(entry, list):
            yield from _outline(reader, entry, min(level + 1, 6))
        else:
            title = " ".join(str(entry.title or "").translate(_LIGATURES).split())
            yield title, level, reader.get_destination_page_number(entry)


# A word cut at a line end: letters, a hyphen (or a soft hyphen), the line break, and on the
# next line the word's lowercase rest and what sticks to it (`ments.`). A match starts only
# where a word starts and takes each run whole (possessive): from each letter of a word with
# no hyphen after it, the plain pattern read on to the word's end (a word of 40,000 letters,
# one `Tj` of 250 bytes compressed, took 74 s; of a megabyte, hours).
_CUT_WORD = re.compile(
    r"(?<![^\W\d_])([^\W\d_]++)([-\u2010\u00ad])\n([^\W\d_]++)(\S*+)(?:[ \t]+|(?=\n)|\Z)"
)
_WORD = re.compile(r"[^\W\d_]+")


def _join_hyphenated(text: str) -> str:
    """Join the words a line end breaks with a hyphen: `infor-` and `mation` become
    `information` when the document spells that word elsewhere, else `infor-mation` (a
    compound such as `well-known` keeps its hyphen; search finds both the parts and the word
    joined). The rest of the word moves up to the line it starts on."""
    if "\n" not in text or not _CUT_WORD.search(text):
        return text
    words = {word.lower() for word in _WORD.findall(text)}

    def join(cut: re.Match[str]) -> str:
        head, hyphen, tail, rest = cut.groups()
        if not tail[0].islower():
            return cut.group(0)
        joined = head + tail
        word = joined if joined.lower() in words else head + hyphen + tail
        more = cut.end() < len(text) and text[cut.end()] != "\n"
        return word + rest + ("\n" if more else "")

    return _CUT_WORD.sub(join, text)
