"""HTML pages: a page's title and text, its headings as markdown `#` lines.

The page is decoded by the caller (`charset.py`); readability finds the main article, the
navigation chrome is left out, and a page too deep or too crowded for a tree is read flat by
the standard library's event parser. Parsers are imported lazily.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from octobrain.safe_text import shows_something

log = logging.getLogger(__name__)

_CHROME = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside",
           "form", "svg", "iframe", "button")  # fmt: skip
_NOT_TEXT = ("script", "style", "noscript", "template", "svg", "iframe", "button")
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BLOCKS = frozenset(("p", "div", "section", "article", "main", "ul", "ol", "li", "blockquote",
                     "table", "thead", "tbody", "tr", "dl", "dt", "dd", "figure", "figcaption",
                     "hr", "body", "html", "center", "details", "summary"))  # fmt: skip
_CELLS = frozenset(("td", "th"))


# What lxml cannot set as an element's text: the C0 controls but tab, line feed and carriage
# return, and U+FFFE/U+FFFF (a NUL the parser drops itself). libxml2 keeps them in the tree it
# builds, and readability, moving a text into a new `<p>`, then failed and logged a traceback.
# A space stands for each: \x0b, \x0c and \x1c–\x1f are whitespace to the text walk anyway.
_NOT_XML = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def title_and_text(markup: str, *, whole: bool = False) -> tuple[str, str]:
    """The title and text of an HTML page: readability's article, or the page without its
    chrome when that is the better text (or readability would take too long). A `whole`
    document (a book's chapter: no site around it) is read all but its scripts and styles,
    its `<header>`, `<footer>` and `<aside>` (a chapter's title, its notes) kept."""
    import lxml.html
    from readability import Document as Readable

    markup = _without_internal_subset(_NOT_XML.sub(" ", markup))
    # As UTF-8 bytes, that encoding named: lxml refuses text holding an XML encoding
    # declaration, and the encoding named overrides what a `<meta>` says.
    if _crowded(markup):
        return _flat_html(markup)
    parser = lxml.html.HTMLParser(encoding="utf-8")
    root = lxml.html.document_fromstring(markup.encode(), parser=parser)
    if any(e.type_name == "ERR_RESOURCE_LIMIT" for e in parser.error_log):
        # libxml2 stops building the tree 256 elements deep and drops the rest of the page.
        return _flat_html(markup)
    title = _html_title(root)
    heavy = _too_heavy(root)  # before the chrome goes: readability reads the page as it came
    chrome = _NOT_TEXT if whole else _CHROME
    for bad in root.xpath("|".join(f"//{tag}" for tag in (*chrome, "head"))):  # (its title)
        bad.drop_tree()
    full = _html_text(root)
    if whole:
        return title, full
    if heavy:
        log.info("%s: read whole, without looking for its article", heavy)
        return title, full
    try:
        readable = Readable(markup)  # text: given bytes, it guesses their encoding itself
        article = _html_text(lxml.html.fromstring(readable.summary(html_partial=True)))
        title = readable.short_title().strip() or title
    except Exception:  # readability gives up on some pages; the cleaned body is still good
        article = ""
    # Readability is built for articles; on a reference page (lists, short sections) it can
    # keep a sliver. Then the chrome-free body is the better text. It is too when readability
    # keeps nearly all of it: the page is the article, and readability drops short lists and
    # footnotes from an article (a page a word processor saved lost its bulleted lists).
    text = article if 0.5 * len(full) <= len(article) < ARTICLE_SHARE * len(full) else full
    return title, text


# The start of a DOCTYPE with an internal subset, after what may come before it (a byte order
# mark, the XML declaration, comments, processing instructions), up to its `[`. Possessive:
# each ends at its first `?>` or `-->` (backtracking into them was exponential in their number).
_SUBSET_START = re.compile(
    r"\ufeff?(?:\s|<\?.*?\?>|<!--.*?-->)*+<!DOCTYPE\b[^\[>]*\[", re.IGNORECASE | re.DOTALL
)
_SUBSET_TOKEN = re.compile(r"[\"'\]]|<!--")  # what may hide the subset's `]` or hold one
_SUBSET_CLOSE = {'"': '"', "'": "'", "<!--": "-->"}
_SUBSET_END = re.compile(r"\s*>")


def _without_internal_subset(markup: str) -> str:
    """`markup` without its DOCTYPE's internal subset (`<!DOCTYPE html [ <!ENTITY x "y"> ]>`,
    as an XHTML chapter may declare): an HTML parser ends the DOCTYPE at its first `>` and read
    the subset's `]>` as the page's first text. The entities it declares are not expanded
    (`&x;` stays as written). One pass; a subset that is not closed is left as it is."""
    start = _SUBSET_START.match(markup)
    if start is None:
        return markup
    at = start.end()
    while (token := _SUBSET_TOKEN.search(markup, at)) is not None:
        if token.group() == "]":
            end = _SUBSET_END.match(markup, token.end())
            if end is None:
                return markup
            return markup[: start.end() - 1] + ">" + markup[end.end() :]
        closed = markup.find(_SUBSET_CLOSE[token.group()], token.end())
        if closed == -1:
            return markup
        at = closed + len(_SUBSET_CLOSE[token.group()])
    return markup


# Over this share of the chrome-free text, readability's article is not taken: what it left
# out is more likely the article's own lists than the page's chrome.
ARTICLE_SHARE = 0.9

# The most elements of a page in which readability looks for the article. It cleans every
# element in Python three times and scores it twice: 30–45 µs an element here, 16–31 s for a
# 4 MB page of 500,000 `<p>` (of which it kept the whole body). A real page has one element in
# 60–75 bytes (the Rust book on one page: 1.9 MB, 25,000), so about 100,000 at `MARKUP_BYTES`;
# a page with more is read whole, its chrome left out, as when readability gives up.
ARTICLE_ELEMENTS = 200_000


def _too_heavy(root: Any) -> str:
    """Why readability would take too long on this page ("" when it would not): over
    `ARTICLE_ELEMENTS` elements, or a shape that adds over `article.ARTICLE_EXTRA_SECONDS`."""
    from octobrain.knowledge.article import ARTICLE_EXTRA_SECONDS, extra_seconds

    elements = int(root.xpath("count(//*)"))
    if elements > ARTICLE_ELEMENTS:
        return f"a page of {elements:,} elements"
    extra = extra_seconds(root)
    if extra > ARTICLE_EXTRA_SECONDS:
        return f"a page whose shape would add about {extra:.0f} s to readability's time"
    return ""


# Attributes one tag may hold before the page is read without a tree: libxml2 and readability
# take time growing with the square of an element's attributes (30,000 on one `<p>`: 17.8 s).
MAX_ATTRIBUTES = 2_000


def _crowded(markup: str) -> bool:
    """Whether some tag holds more than `MAX_ATTRIBUTES` `=` (one pass; no substring made)."""
    at = markup.find("<")
    while at != -1:
        end = markup.find(">", at)
        if markup.count("=", at, len(markup) if end == -1 else end) > MAX_ATTRIBUTES:
            return True
        at = -1 if end == -1 else markup.find("<", end)
    return False


def _html_title(root: Any) -> str:
    for path in ("//title", "//h1"):
        found = root.xpath(path)
        if found:
            text = " ".join(found[0].text_content().split())
            if shows_something(text):
                return text
    return ""


# A `<br>` (or a block's end) in the text being gathered: a line break, where the page's own
# line breaks are spaces. A NUL: libxml2 drops it from a page (in the flat reader, a NUL in
# the page breaks a line, which does no harm).
_BR = "\x00"


class _Blocks:
    """Collects block texts: inline text accumulates in `buf`, a block boundary flushes it.

    A page is walked whole (up to `ARTICLE_ELEMENTS` elements, more when it is read without
    readability), then readability's article is, so the walk skips what adds nothing: empty
    texts, and flushes of nothing but whitespace."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.buf: list[str] = []
        # The lists being walked, innermost last: the next item's number and the step
        # (-1 in an `<ol reversed>`), or None in a bulleted list.
        self.lists: list[tuple[int, int] | None] = []

    def flush(self, prefix: str = "") -> None:
        if not self.buf:
            return
        joined = "".join(self.buf)
        self.buf = []
        if not joined or joined.isspace():  # `str.split` blanks: no line would be left
            return
        if _BR in joined:
            lines = (" ".join(part.split()) for part in joined.split(_BR))
            joined = "\n".join(line for line in lines if line)
            if joined:
                self.blocks.append(prefix + joined)
        else:
            self.blocks.append(prefix + " ".join(joined.split()))

    def walk(self, el: Any) -> None:
        tag = el.tag
        tag = tag.lower() if isinstance(tag, str) else ""
        buf = self.buf
        if tag in _HEADINGS:
            self.flush()
            text = " ".join(el.text_content().split())
            if shows_something(text):
                self.blocks.append("#" * _HEADINGS[tag] + " " + text)
        elif tag == "pre":
            self.flush()
            self.blocks.append(el.text_content().strip("\n"))
        elif tag == "br":
            buf.append(_BR)
        elif tag in _BLOCKS:
            self.flush()
            first = len(self.blocks)
            marker = _list_marker(self.lists, el) if tag == "li" else ""
            if tag in ("ol", "ul"):
                self.lists.append(_numbered(el) if tag == "ol" else None)
            if el.text:
                self.buf.append(el.text)
            for child in el:
                self.walk(child)
            self.flush()
            if tag in ("ol", "ul"):
                self.lists.pop()
            if marker and len(self.blocks) > first:  # (its text may be in a `<p>`)
                self.blocks[first] = marker + self.blocks[first]
        elif tag in _CELLS:  # one line a row: the blocks of a cell (its `<p>`s) on it
            cell = _Blocks()
            if el.text:
                cell.buf.append(el.text)
            for child in el:
                cell.walk(child)
            cell.flush()
            buf.append(" ".join(" ".join(cell.blocks).split()) + " | ")
        elif tag:  # inline
            if el.text:
                buf.append(el.text)
            for child in el:
                self.walk(child)
        tail = el.tail
        if tail:
            self.buf.append(tail)


def _list_marker(lists: list[tuple[int, int] | None], item: Any) -> str:
    """An `<li>`'s marker (`item`: its element or its attributes), in the lists being read
    (`lists`, innermost last): its number in an `<ol>` (its `value`, else the count), else
    `- `. Counts it."""
    numbered = lists[-1] if lists else None
    if numbered is None:
        return "- "
    number, step = numbered
    number = _int_attribute(item, "value", number)
    lists[-1] = (number + step, step)
    return f"{number}. "


def _numbered(ol: Any) -> tuple[int, int]:
    """The first number and the step of an `<ol>` (`start`; `reversed` counts down from its
    number of items)."""
    if ol.get("reversed") is None:
        return _int_attribute(ol, "start", 1), 1
    items = sum(1 for child in ol if isinstance(child.tag, str) and child.tag.lower() == "li")
    return _int_attribute(ol, "start", items), -1


def _numbered_flat(attrs: dict[str, str | None]) -> tuple[int, int] | None:
    """`_numbered` from an `<ol>`'s attributes alone: a `reversed` list without its `start`
    counts down from its number of items, not known yet, so its items are bullets."""
    if "reversed" in attrs and "start" not in attrs:
        return None
    step = -1 if "reversed" in attrs else 1
    return _int_attribute(attrs, "start", 1), step


def _int_attribute(el: Any, name: str, default: int) -> int:
    """An integer attribute (`start`, `value`), `default` when it is none or, as browsers
    read it, past a 32-bit integer: a 4,000-digit `start` was printed before each item."""
    try:
        number = int(str(el.get(name, "")).strip()[:12])
    except ValueError:
        return default
    return number if -(2**31) <= number < 2**31 else default


def _html_text(root: Any) -> str:
    blocks = _Blocks()
    blocks.walk(root)
    blocks.flush()
    return "\n\n".join(b.strip(" |") if "|" in b else b for b in blocks.blocks)


_FEED_CHARS = 1 << 20  # an unclosed tag is rescanned once a chunk: at most 7 times in 6 MiB


def _flat_html(markup: str) -> tuple[str, str]:
    """Title and text of a page nested too deeply for a tree: every text outside the chrome
    tags, a line for each block, list items and headings marked as `_Blocks` marks them (the
    stdlib's event parser keeps no tree, so any depth reads)."""
    from html.parser import HTMLParser

    class Flat(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.title: list[str] = []
            self.chrome = 0  # depth inside chrome tags
            self.in_title = False
            # The lists being read, as `_Blocks.lists`, and the marker of the list item or
            # heading just begun, put before its first text (its text may be in a `<p>`).
            self.lists: list[tuple[int, int] | None] = []
            self.marker = ""

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag in _CHROME:
                self.chrome += 1
            elif tag == "title":
                self.in_title = not self.chrome  # an <svg>'s title names a picture
            elif tag in _BLOCKS or tag in _HEADINGS or tag == "br":
                self.parts.append(_BR)
                if tag in ("ol", "ul"):
                    self.lists.append(_numbered_flat(dict(attrs)) if tag == "ol" else None)
                elif tag == "li":
                    self.marker = _list_marker(self.lists, dict(attrs))
                elif tag in _HEADINGS:
                    self.marker = "#" * _HEADINGS[tag] + " "

        def handle_endtag(self, tag: str) -> None:
            if tag in _CHROME:
                self.chrome = max(0, self.chrome - 1)
            elif tag == "title":
                self.in_title = False
            elif tag in _BLOCKS or tag in _HEADINGS:
                self.parts.append(_BR)
                if tag in ("ol", "ul") and self.lists:
                    self.lists.pop()
                self.marker = ""  # (an item or heading without text has no line)

        def parse_marked_section(self, i: int, report: bool = True) -> int:
            try:
                return super().parse_marked_section(i, report)
            except AssertionError:  # `<![ x`: what a browser skips as a bogus comment
                end = self.rawdata.find(">", i)
                return -1 if end < 0 else end + 1

        def handle_data(self, data: str) -> None:
            if self.in_title:
                self.title.append(data)
            elif not self.chrome:
                if self.marker and not data.isspace():
                    self.parts.append(self.marker)
                    self.marker = ""
                self.parts.append(data)

    flat = Flat()
    for start in range(0, len(markup), _FEED_CHARS):
        flat.feed(markup[start : start + _FEED_CHARS])
    # Not `close()`: it reads what is left of an unclosed tag or comment a character at a
    # time, rescanning the rest each time (quadratic: 100 kB of `<a ` took 130 s), where a
    # browser reads that rest as part of the tag or comment. A complete comment fed last
    # hands over any text still held back.
    flat.feed("<!---->")
    lines = (" ".join(line.split()) for line in "".join(flat.parts).split(_BR))
    return " ".join("".join(flat.title).split()), "\n\n".join(line for line in lines if line)
