"""Extraction: raw bytes of a source → a titled, markdown-ish plain text.

The type comes from the HTTP Content-Type, else the file extension, else a look at the bytes.
HTML is decoded as a browser would (`charset.py`), goes through readability (the main article,
no navigation chrome) and is rendered with its headings as markdown `#` lines, so the chunker
can keep section paths. PDF text comes from pypdf, DOCX paragraphs, headings and tables from
python-docx's XML elements. Parsers are imported lazily.
"""

from __future__ import annotations

import io
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from octobrain.errors import InvalidInput
from octobrain.knowledge.charset import decode_named, decode_page
from octobrain.knowledge.chunk import heading_text
from octobrain.knowledge.sources import Fetched, SourceKind

log = logging.getLogger(__name__)


class DocType(str, Enum):
    """The kinds of documents we extract."""

    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"
    PDF = "pdf"
    DOCX = "docx"


@dataclass(frozen=True)
class Document:
    """The extracted text of one source (what `read` returns and what gets chunked)."""

    uri: str
    title: str
    doc_type: DocType
    text: str


EXTENSIONS = {
    ".html": DocType.HTML, ".htm": DocType.HTML, ".xhtml": DocType.HTML,
    ".md": DocType.MARKDOWN, ".markdown": DocType.MARKDOWN,
    ".txt": DocType.TEXT, ".text": DocType.TEXT, ".log": DocType.TEXT, ".csv": DocType.TEXT,
    ".tsv": DocType.TEXT, ".rst": DocType.TEXT,
    ".pdf": DocType.PDF,
    ".docx": DocType.DOCX,
}  # fmt: skip
MIME_TYPES = {
    "text/html": DocType.HTML,
    "application/xhtml+xml": DocType.HTML,
    "text/markdown": DocType.MARKDOWN,
    "text/x-markdown": DocType.MARKDOWN,
    "text/plain": DocType.TEXT,
    "application/pdf": DocType.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocType.DOCX,
}
_UNTYPED = ("", "application/octet-stream", "binary/octet-stream")
SUPPORTED = ".html, .htm, .md, .markdown, .txt (or other UTF-8 text), .pdf, .docx"


def _extension(fetched: Fetched) -> str:
    if fetched.ref.path is not None:
        return fetched.ref.path.suffix.lower()
    return PurePosixPath(urlsplit(fetched.ref.uri).path).suffix.lower()


def _sniff(data: bytes) -> DocType | None:
    if data.startswith(b"%PDF-"):
        return DocType.PDF
    if data.startswith(b"PK\x03\x04"):
        return DocType.DOCX if b"word/" in data[:4096] else None
    head = data[:4096].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return DocType.HTML
    if b"\x00" in data[:8192]:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return DocType.TEXT


def detect_type(fetched: Fetched) -> DocType:
    """Content-Type first (URLs), then the extension, then the bytes themselves."""
    ext = _extension(fetched)
    ct = fetched.content_type
    if fetched.ref.kind is SourceKind.URL and ct not in _UNTYPED:
        doc_type = MIME_TYPES.get(ct)
        if doc_type is DocType.TEXT and EXTENSIONS.get(ext) is DocType.MARKDOWN:
            return DocType.MARKDOWN  # servers often send .md files as text/plain
        if doc_type is not None:
            return doc_type
        if ct.startswith("text/"):
            return DocType.TEXT
        raise InvalidInput(
            "source", f"{fetched.ref.uri}: unsupported content type {ct!r} (supported: {SUPPORTED})"
        )
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    sniffed = _sniff(fetched.data)
    if sniffed is None:
        what = f"file type {ext!r}" if ext else "file type (no extension, not UTF-8 text)"
        raise InvalidInput(
            "source", f"{fetched.ref.uri}: unsupported {what}; supported: {SUPPORTED}"
        )
    return sniffed


UNPACK_FACTOR = 10
# The most markup parsed into one tree: an HTML page, a DOCX's XML parts together. A tree
# costs 40–90 times its markup in memory and about 3 s a megabyte on a 2-core machine (lxml
# and readability for HTML, python-docx), so a 1 MB DOCX of 40 MB of empty paragraphs, or a
# 50 MB page, once took minutes and gigabytes. A long report's document.xml is 1–5 MB.
MARKUP_BYTES = 6 << 20
# How long a PDF's pages may take to give their text: pages that share one content stream of
# millions of operators cost pypdf 0.2 s each however little text they hold.
PDF_SECONDS = 60.0
# The most tokens (operators and operands) pypdf parses in one content stream: about 7 s of
# parsing on a 2-core machine. The limit is checked between pages; one page of 990,000 `Tj`
# operators, 10.7 kB compressed, took 27.5 s and 372 MB. A page of text is a few thousand; a
# page past it (a dense drawing) is left out of the text, with a warning.
PDF_PAGE_TOKENS = 500_000


class _Unpacked(Exception):
    """A document that unpacks to more than the size cap."""

    def __init__(self, what: str, size: int, bound: int = 0) -> None:
        super().__init__(what)
        self.size = size
        self.bound = bound  # 0: the unpack bound


def extract(fetched: Fetched, max_bytes: int) -> Document:
    """Extract the text of fetched bytes. Unreadable documents raise InvalidInput(source).

    What a compressed document unpacks to is bounded too, at `UNPACK_FACTOR` × `max_bytes`
    (`knowledge.max_source_bytes`): a DOCX's parts together, a PDF's extracted text. A DOCX of
    a megabyte can hold a part that inflates to gigabytes, and python-docx reads every part
    whole; an ordinary one unpacks to 5–25 times its size (the bare template: 36 kB to 830 kB),
    so the bound is on the whole, not on the ratio."""
    doc_type = detect_type(fetched)
    unpacked = UNPACK_FACTOR * max_bytes
    try:
        if doc_type is DocType.HTML:
            if len(fetched.data) > MARKUP_BYTES:
                raise _Unpacked("the HTML", len(fetched.data), MARKUP_BYTES)
            title, text = _html(decode_page(fetched.data, fetched.charset))
        elif doc_type is DocType.PDF:
            title, text = _pdf(fetched.data, unpacked)
        elif doc_type is DocType.DOCX:
            title, text = _docx(fetched.data, unpacked)
        else:
            title, text = "", _decode(fetched.data, fetched.charset)
    except InvalidInput:
        raise
    except _Unpacked as exc:
        bound = (
            f"the {exc.bound}-byte bound on markup parsed at once"
            if exc.bound
            else f"the {unpacked}-byte bound ({UNPACK_FACTOR} × knowledge.max_source_bytes)"
        )
        raise InvalidInput(
            "source", f"{fetched.ref.uri}: {exc} unpacks to {exc.size} bytes or more, over {bound}"
        ) from None
    except Exception as exc:  # a parser's own error on a corrupt file: report, don't crash
        raise InvalidInput(
            "source", f"{fetched.ref.uri}: cannot read this {doc_type.value} document: {exc}"
        ) from exc
    text = normalise(text)
    title = " ".join(title.split())[:200]  # one line: it leads every chunk header
    return Document(fetched.ref.uri, title or first_title(text), doc_type, text)


def document_from_text(uri: str, text: str) -> Document:
    """A note's text as a document (session notes are plain text)."""
    text = normalise(text)
    return Document(uri, first_title(text), DocType.TEXT, text)


def normalise(text: str) -> str:
    """One line ending, no trailing spaces, at most one blank line in a row, no NULs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if _BLANK_BREAK.search(text):  # (most texts have no line that ends in blanks)
        text = _TRAILING.sub("", text)  # each line's trailing blanks, as `str.rstrip` takes them
    if "\n\n\n" in text:  # (a search for the pattern itself took 0.35 s on 45 MB)
        text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


# Whitespace but the line break, before one: `\s` is `str.isspace` (so \x1c–\x1f and U+00A0
# too). One pass over the text; a line list cost 13 million strings on a 50 MB file. A match
# starts only where a run of such whitespace starts and takes the run whole (possessive): from
# every place inside a run that does not end a line, the plain pattern scanned to its end again
# (32,760 spaces and an `x`, a valid note, took 10.9 s). Looking behind at every character
# costs 0.86 s on 45 MB of words, so the text is first searched for a line ending in one
# (0.26 s), which most have none of.
_TRAILING = re.compile(r"(?<![^\S\n])[^\S\n]++(?=\n)")
_BLANK_BREAK = re.compile(r"[^\S\n]\n")


_ATX = re.compile(r"#{1,6}[ \t]+(.*)")
_HASH_LINE = re.compile(r"\n(?=#)")  # the line ending before a line that starts with `#`


def first_title(text: str) -> str:
    """The first markdown heading, else the first non-empty line (≤ 100 chars), else Untitled."""
    # Only lines that start with `#` are read for the heading: a pattern over the text was
    # quadratic, and a line loop read every line of a 6 MB file without one.
    for start in _hash_lines(text):
        end = text.find("\n", start)
        heading = _ATX.match(text[start:] if end < 0 else text[start:end])
        title = heading_text(heading.group(1).encode()).decode().strip() if heading else ""
        if title:
            return title[:100]
    for line in _each_line(text):
        if line.strip():
            return line.strip()[:100]
    return "Untitled"


def _hash_lines(text: str) -> Iterator[int]:
    """Where the first line and each line that starts with `#` begin (lines end at "\n")."""
    yield 0
    for found in _HASH_LINE.finditer(text):
        yield found.end()


def _each_line(text: str) -> Iterator[str]:
    """The lines of `text` split at "\n", as `str.split` gives them, one at a time (the title
    is near the top: the rest need not be cut)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _decode(data: bytes, charset: str = "") -> str:
    """Plain text or markdown: as its byte order mark or the HTTP Content-Type's charset says
    (`charset.decode_named`), else UTF-8, else Latin-1 (every byte decodes; better than
    refusing a .txt)."""
    text = decode_named(data, charset)
    if text is not None:
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# ---- HTML -----------------------------------------------------------------------------------

_CHROME = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside",
           "form", "svg", "iframe", "button")  # fmt: skip
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


def _html(markup: str) -> tuple[str, str]:
    import lxml.html
    from readability import Document as Readable

    markup = _NOT_XML.sub(" ", markup)
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
    for bad in root.xpath("|".join(f"//{tag}" for tag in _CHROME)):
        bad.drop_tree()
    full = _html_text(root)
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
    # keep a sliver. Then the chrome-free body is the better text.
    text = article if len(article) >= 0.5 * len(full) else full
    return title, text


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
            if text:
                return text
    return ""


class _Blocks:
    """Collects block texts: inline text accumulates in `buf`, a block boundary flushes it.

    A page is walked whole (up to `ARTICLE_ELEMENTS` elements, more when it is read without
    readability), then readability's article is, so the walk skips what adds nothing: empty
    texts, and flushes of nothing but whitespace."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.buf: list[str] = []

    def flush(self, prefix: str = "") -> None:
        if not self.buf:
            return
        joined = "".join(self.buf)
        self.buf = []
        if not joined or joined.isspace():  # `str.split` blanks: no line would be left
            return
        if "\n" in joined:
            lines = (" ".join(part.split()) for part in joined.split("\n"))
            self.blocks.append(prefix + "\n".join(line for line in lines if line))
        else:
            self.blocks.append(prefix + " ".join(joined.split()))

    def walk(self, el: Any) -> None:
        tag = el.tag
        tag = tag.lower() if isinstance(tag, str) else ""
        buf = self.buf
        if tag in _HEADINGS:
            self.flush()
            text = " ".join(el.text_content().split())
            if text:
                self.blocks.append("#" * _HEADINGS[tag] + " " + text)
        elif tag == "pre":
            self.flush()
            self.blocks.append(el.text_content().strip("\n"))
        elif tag == "br":
            buf.append("\n")
        elif tag in _BLOCKS:
            self.flush()
            if el.text:
                self.buf.append(el.text)
            for child in el:
                self.walk(child)
            self.flush("- " if tag == "li" else "")
        elif tag in _CELLS:
            if el.text:
                buf.append(el.text)
            for child in el:
                self.walk(child)
            self.buf.append(" | ")
        elif tag:  # inline
            if el.text:
                buf.append(el.text)
            for child in el:
                self.walk(child)
        tail = el.tail
        if tail:
            self.buf.append(tail)


def _html_text(root: Any) -> str:
    blocks = _Blocks()
    blocks.walk(root)
    blocks.flush()
    return "\n\n".join(b.strip(" |") if "|" in b else b for b in blocks.blocks)


_FEED_CHARS = 1 << 20  # an unclosed tag is rescanned once a chunk: at most 7 times in 6 MiB


def _flat_html(markup: str) -> tuple[str, str]:
    """Title and text of a page nested too deeply for a tree: every text outside the chrome
    tags, a line for each block (the stdlib's event parser keeps no tree, so any depth reads)."""
    from html.parser import HTMLParser

    class Flat(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.title: list[str] = []
            self.chrome = 0  # depth inside chrome tags
            self.in_title = False

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag in _CHROME:
                self.chrome += 1
            elif tag == "title":
                self.in_title = not self.chrome  # an <svg>'s title names a picture
            elif tag in _BLOCKS or tag in _HEADINGS or tag == "br":
                self.parts.append("\n")

        def handle_endtag(self, tag: str) -> None:
            if tag in _CHROME:
                self.chrome = max(0, self.chrome - 1)
            elif tag == "title":
                self.in_title = False
            elif tag in _BLOCKS or tag in _HEADINGS:
                self.parts.append("\n")

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
                self.parts.append(data)

    flat = Flat()
    for start in range(0, len(markup), _FEED_CHARS):
        flat.feed(markup[start : start + _FEED_CHARS])
    # Not `close()`: it reads what is left of an unclosed tag or comment a character at a
    # time, rescanning the rest each time (quadratic: 100 kB of `<a ` took 130 s), where a
    # browser reads that rest as part of the tag or comment. A complete comment fed last
    # hands over any text still held back.
    flat.feed("<!---->")
    lines = (" ".join(line.split()) for line in "".join(flat.parts).split("\n"))
    return " ".join("".join(flat.title).split()), "\n\n".join(line for line in lines if line)


# ---- PDF and DOCX ---------------------------------------------------------------------------


def _pdf(data: bytes, max_bytes: int) -> tuple[str, str]:
    from pypdf import apply_configuration

    with apply_configuration(stream_parsing_work_maximum_count=PDF_PAGE_TOKENS):
        return _pdf_text(data, max_bytes)


def _pdf_text(data: bytes, max_bytes: int) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise InvalidInput("source", "the PDF is encrypted with a password")
    pages: list[str] = []
    size = left_out = 0
    deadline = time.monotonic() + PDF_SECONDS
    for number, page in enumerate(reader.pages, 1):  # pypdf bounds each stream it inflates
        try:
            pages.append(page.extract_text() or "")
        except LimitReachedError:
            log.warning(
                "page %d of the PDF has over %d drawing tokens: its text is left out",
                number,
                PDF_PAGE_TOKENS,
            )
            left_out += 1
            pages.append("")
        size += len(pages[-1])
        if size > max_bytes:
            raise _Unpacked("its text", size)
        if time.monotonic() > deadline:
            raise InvalidInput(
                "source",
                f"the PDF's text was not out within {PDF_SECONDS:g} s ({len(pages)} of "
                f"{len(reader.pages)} pages read); nothing was indexed",
            )
    if left_out and not any(p.strip() for p in pages):
        raise InvalidInput(
            "source",
            f"every page of the PDF with text has over {PDF_PAGE_TOKENS} drawing tokens "
            f"({left_out} of {len(pages)}); nothing was indexed",
        )
    meta = reader.metadata
    title = str(meta.title) if meta is not None and meta.title else ""
    return title, "\n\n".join(p.strip() for p in pages if p.strip())


# The most table rows and cells read from one DOCX (a row counts as one besides its cells):
# reading one costs little, this bounds what the XML cap still lets through (6 MiB of bare
# `<w:tc/>` is 900,000 cells). Word writes 90 bytes or more a cell, so no DOCX within
# `MARKUP_BYTES` Word wrote reaches it.
DOCX_TABLE_CELLS = 200_000


def _docx(data: bytes, max_bytes: int) -> tuple[str, str]:
    import zipfile

    import docx

    with zipfile.ZipFile(io.BytesIO(data)) as package:  # a part never inflates past its size
        parts = package.infolist()
        size = sum(part.file_size for part in parts)
        if size > max_bytes:
            raise _Unpacked("the DOCX package", size)
        markup = _docx_markup(package, parts)
    if markup > MARKUP_BYTES:
        raise _Unpacked("the DOCX's XML", markup, MARKUP_BYTES)
    document = docx.Document(io.BytesIO(data))
    styles, default = _paragraph_styles(document.styles.element)
    body = document.element.body
    _drop_shadow_text(body)
    blocks: list[str] = []
    cells = 0
    for item in _docx_content(body):
        if item.tag == _W_TBL:
            cells = _docx_rows(item, blocks, cells)
            continue
        text = _docx_text(item).strip()
        if not text:
            continue
        style_element = item.find(f"{_W_PPR}/{_W_PSTYLE}")
        style_id = None if style_element is None else style_element.get(_W_VAL)
        style = styles.get(style_id, default) if style_id else default
        level = re.fullmatch(r"Heading (\d)", style)
        if level:
            blocks.append("#" * min(6, int(level.group(1))) + " " + text)
        elif style == "Title":
            blocks.append("# " + text)
        elif style.startswith("List"):
            blocks.append("- " + text)
        else:
            blocks.append(text)
    title = document.core_properties.title or ""
    return title, "\n\n".join(blocks)


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W_P, _W_TBL, _W_TR, _W_TC = f"{_W}p", f"{_W}tbl", f"{_W}tr", f"{_W}tc"
_W_PPR, _W_PSTYLE, _W_VAL = f"{_W}pPr", f"{_W}pStyle", f"{_W}val"
# What holds content without being content: a content control (its `sdtContent`), custom XML,
# a smart tag, a tracked insertion or move. Their paragraphs, rows, cells and runs count as if
# they stood in its place (Word templates and forms keep much of their text in controls).
_W_WRAPPERS = {f"{_W}{name}" for name in ("sdt", "sdtContent", "customXml", "smartTag", "ins",
                                           "moveTo")}  # fmt: skip
# Text a reader does not see as the document's: tracked deletions and the old place of a moved
# passage (Word keeps both), and the fallback copy of a text box (`mc:Fallback` repeats what
# its `mc:Choice` holds, for older readers).
_SHADOWS = (
    f"{_W}del",
    f"{_W}moveFrom",
    "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback",
)
# A run's characters (`w:t`) and what Word shows for its other marks.
_W_CHARS = {f"{_W}t": None, f"{_W}tab": "\t", f"{_W}ptab": "\t", f"{_W}br": "\n",
            f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}  # fmt: skip


def _drop_shadow_text(body: Any) -> None:
    for shadow in list(body.iter(*_SHADOWS)):
        parent = shadow.getparent()
        if parent is not None:
            parent.remove(shadow)


def _docx_content(element: Any, kinds: tuple[str, ...] = (_W_P, _W_TBL)) -> Iterator[Any]:
    """The children of `element` of `kinds`, in order, those inside wrappers (`_W_WRAPPERS`)
    included where the wrapper stands."""
    pending = list(reversed(element))
    while pending:
        child = pending.pop()
        if child.tag in kinds:
            yield child
        elif child.tag in _W_WRAPPERS:
            pending.extend(reversed(child))


def _docx_text(paragraph: Any) -> str:
    """What a paragraph shows: every run's text, in a hyperlink, a field's result, a content
    control, a tracked insertion or a text box anchored in it."""
    out = []
    for element in paragraph.iter(*_W_CHARS):
        mark = _W_CHARS[element.tag]
        out.append(element.text or "" if mark is None else mark)
    return "".join(out)


def _docx_markup(package: Any, parts: list[Any]) -> int:
    """The bytes of a DOCX's parts that python-docx may parse as XML: the relationship parts,
    and those whose content type (`[Content_Types].xml`: by part name, then by extension, as
    python-docx looks it up) is an XML one. By file name alone (`.xml`), a document part named
    `word/document.bin` went uncounted: 60 MB of XML in a 0.2 MB file, 62 s and 1.1 GB."""
    import lxml.etree

    listed = [p for p in parts if p.filename == "[Content_Types].xml"]
    if not listed:  # python-docx cannot open it either; count every part
        return sum(p.file_size for p in parts)
    if sum(p.file_size for p in listed) > MARKUP_BYTES:
        raise _Unpacked("the DOCX's XML", listed[0].file_size, MARKUP_BYTES)
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True)
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    try:
        root = lxml.etree.fromstring(package.read(listed[-1]), parser=parser)
    except lxml.etree.XMLSyntaxError:
        return sum(p.file_size for p in parts)
    for entry in root:
        kind = str(entry.get("ContentType", "")).lower()
        if str(entry.tag).endswith("}Default"):
            defaults[str(entry.get("Extension", "")).lower()] = kind
        elif str(entry.tag).endswith("}Override"):
            overrides[str(entry.get("PartName", "")).lower()] = kind
    total = 0
    for part in parts:
        name = "/" + part.filename.lower()
        last = name.rsplit("/", 1)[-1]
        extension = last.rpartition(".")[2] if "." in last else ""
        kind = overrides.get(name) or defaults.get(extension, "")
        if name.endswith((".rels", ".xml")) or kind.endswith("xml"):
            total += part.file_size
    return total


def _paragraph_styles(styles: Any) -> tuple[dict[str, str], str]:
    """The names of a DOCX's paragraph styles by id, and the default paragraph style's name.

    Read once: python-docx looks a paragraph's style up among all the styles (and the default
    among them again), for every paragraph: 5,000 styles and 5,000 paragraphs took 282 s.
    As it does: the first style of an id counts, one of another type gives the default."""
    from docx.oxml.ns import qn
    from docx.styles import BabelFish

    by_id: dict[str, tuple[str | None, str]] = {}
    default = ""
    for style in styles.iterchildren(qn("w:style")):
        kind, style_id = style.get(qn("w:type")), style.get(qn("w:styleId"))
        name_element = style.find(qn("w:name"))
        name = name_element.get(qn("w:val"), "") if name_element is not None else ""
        name = BabelFish.internal2ui(name)  # `heading 1` is `Heading 1`
        if style_id:
            by_id.setdefault(style_id, (kind, name))
        if kind == "paragraph" and style.get(qn("w:default")) in ("1", "true", "on"):
            default = name  # the last default counts
    names = {key: name for key, (kind, name) in by_id.items() if kind == "paragraph"}
    return names, default


def _docx_rows(table: Any, blocks: list[str], cells: int) -> int:
    """A line per row of `table`, its cells' texts joined by ` | `; the rows and cells read
    so far, `cells` included.

    One cell per `w:tc`, with its own paragraphs; the rows of a table nested in a cell follow
    its row's line. Not python-docx's `row.cells`: it repeats a cell for each grid column it
    spans (a `w:gridSpan` of 3,000,000 took 120 s and 388 MB) and walks up the rows for each
    vertically merged one (200 × 20 such cells: 70 s). (A table nests in a table at most
    about 128 deep: the XML parser stops at 256 levels.)"""
    for row in _docx_content(table, (_W_TR,)):
        cells = _cell_read(cells)
        texts, nested = [], []
        for tc in _docx_content(row, (_W_TC,)):
            cells = _cell_read(cells)
            paragraphs = []
            for item in _docx_content(tc):
                if item.tag == _W_TBL:
                    nested.append(item)
                else:
                    paragraphs.append(_docx_text(item))
            texts.append(" ".join("\n".join(paragraphs).split()))
        if any(texts):  # a row of empty (or vertically merged) cells says nothing
            blocks.append(" | ".join(texts))
        for inner in nested:
            cells = _docx_rows(inner, blocks, cells)
    return cells


def _cell_read(cells: int) -> int:
    if cells >= DOCX_TABLE_CELLS:
        raise InvalidInput(
            "source",
            f"the DOCX's tables have over {DOCX_TABLE_CELLS} rows and cells "
            "(knowledge/extract.DOCX_TABLE_CELLS); nothing was indexed",
        )
    return cells + 1
