"""Extraction: raw bytes of a source → a titled, markdown-ish plain text.

The type comes from the HTTP Content-Type, else the file extension, else a look at the bytes.
HTML is decoded as a browser would (`charset.py`), goes through readability (the main article,
no navigation chrome) and is rendered with its headings as markdown `#` lines, so the chunker
can keep section paths (`html_text.py`). PDF text comes from pypdf (here), read as its pages
show it (`pdf_pieces.py`: note numbers apart from their words, table cells apart;
`pdf_text.py`: no running headers, no line-end hyphens, headings from its outline); DOCX
paragraphs, headings and tables from python-docx's XML elements (`docx_text.py`), an ODT's
from its `content.xml` (`odt_text.py`); an EPUB's spine documents by the HTML reader, a
section each (`epub_text.py`); RTF's text and title by striprtf, its paragraphs kept, in
its code page (`rtf_text.py`); what a document unpacks to is bounded (`unpacked.py`).
Parsers are imported lazily.
"""

from __future__ import annotations

import io
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from octobrain.errors import InvalidInput, as_json
from octobrain.knowledge import (
    docx_text,
    epub_text,
    html_text,
    odt_text,
    pdf_columns,
    pdf_notices,
    pdf_pieces,
    pdf_streams,
    pdf_text,
    rtf_text,
)
from octobrain.knowledge.charset import decode_named, decode_page
from octobrain.knowledge.chunk import first_heading, front_matter_end, heading_text
from octobrain.knowledge.extractor_versions import EXTRACTOR_VERSIONS
from octobrain.knowledge.sources import Fetched, SourceKind
from octobrain.knowledge.unpacked import MARKUP_BYTES, Unpacked
from octobrain.safe_text import client_text, same_text_key, shows_something

log = logging.getLogger(__name__)


class DocType(str, Enum):
    """The kinds of documents we extract."""

    HTML = "html"
    MARKDOWN = "markdown"
    TEXT = "text"
    PDF = "pdf"
    DOCX = "docx"
    EPUB = "epub"
    ODT = "odt"
    RTF = "rtf"


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
    ".epub": DocType.EPUB,
    ".odt": DocType.ODT, ".ott": DocType.ODT,
    ".rtf": DocType.RTF,
}  # fmt: skip
MIME_TYPES = {
    "text/html": DocType.HTML,
    "application/xhtml+xml": DocType.HTML,
    "text/markdown": DocType.MARKDOWN,
    "text/x-markdown": DocType.MARKDOWN,
    "text/plain": DocType.TEXT,
    "application/pdf": DocType.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocType.DOCX,
    "application/epub+zip": DocType.EPUB,
    "application/vnd.oasis.opendocument.text": DocType.ODT,
    "application/rtf": DocType.RTF,
    "text/rtf": DocType.RTF,
}


def extracted_by(doc_type: str) -> str:
    """The mark a source row's `chunker` holds for the extraction of its format (a `DocType`
    or its value): "" at version 1, so a source indexed before versions were recorded is not
    indexed again for that alone."""
    name = doc_type.value if isinstance(doc_type, DocType) else doc_type
    version = EXTRACTOR_VERSIONS.get(DocType(name), 1) if name in _TYPE_NAMES else 1
    return f"/{name}{version}" if version > 1 else ""


_TYPE_NAMES = frozenset(t.value for t in DocType)


_UNTYPED = ("", "application/octet-stream", "binary/octet-stream")
SUPPORTED = (
    ".html, .htm, .md, .markdown, .txt (or other UTF-8 text), .pdf, .docx, .odt, .epub, .rtf"
)


def _extension(fetched: Fetched) -> str:
    if fetched.ref.path is not None:
        return fetched.ref.path.suffix.lower()
    return PurePosixPath(urlsplit(fetched.ref.uri).path).suffix.lower()


def _sniff(data: bytes) -> DocType | None:
    if data.startswith(b"%PDF-"):
        return DocType.PDF
    if data.startswith(b"PK\x03\x04"):
        if data[30:38] == b"mimetype":  # (its first entry, stored: the package's type)
            if b"application/epub+zip" in data[38:128]:
                return DocType.EPUB
            if b"application/vnd.oasis.opendocument.text" in data[38:128]:
                return DocType.ODT
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
    """Content-Type first (URLs), then the extension, then the bytes themselves. RTF, which
    is ASCII and read as text gave its control words, is RTF whatever its name or type."""
    if fetched.data[:16].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        return DocType.RTF
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
            "source",
            f"{fetched.ref.uri}: unsupported content type {as_json(ct)} (supported: {SUPPORTED})",
        )
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    sniffed = _sniff(fetched.data)
    if sniffed is None:
        what = f"file type {as_json(ext)}" if ext else "file type (no extension, not UTF-8 text)"
        raise InvalidInput(
            "source", f"{fetched.ref.uri}: unsupported {what}; supported: {SUPPORTED}"
        )
    return sniffed


UNPACK_FACTOR = 10
# How long a PDF's pages may take to give their text: pages that share one content stream of
# millions of operators cost pypdf 0.2 s each however little text they hold. Read before each
# operator too: one page drawing a form of 10 MB of whitespace (10 kB compressed) 200 times
# made pypdf parse it 200 times, 156 s in one page. A page may run past it by the parse of one
# content stream, bounded in bytes (`pdf_streams.PDF_STREAM_BYTES`: 4 s) and tokens, and the
# text of one operator in it (a string of that size: up to 11 s).
PDF_SECONDS = 60.0
# The most tokens (operators and operands) pypdf parses for one page, its forms' counted each
# time one is drawn: 1 to 2 s of parsing. One page of 990,000 `Tj` operators, 10.7 kB
# compressed, took 27.5 s and 372 MB (the time then read between pages only); a form of 499,999
# drawn 5,000 times was read until the time was up. A page of text is a few thousand; a
# page past it (a dense drawing) is left out of the text, with a warning.
PDF_PAGE_TOKENS = 500_000
# The most objects a PDF's cross-reference streams may list, for its size: pypdf reads each
# entry (about 10 µs and 200 bytes) before any page, outside `PDF_SECONDS`, up to 2,000,000,
# and a compressed stream lists them in a byte or less each (an 18 kB PDF listing 2,000,000
# took 20.5 s and 260 MB). A real PDF's object takes tens of bytes, even compressed: one per
# `PDF_XREF_BYTES` of the file is more than any holds (and 100,000 whatever its size, 1 s).
PDF_XREF_ENTRIES = 100_000
PDF_XREF_BYTES = 8


def extract(fetched: Fetched, max_bytes: int) -> Document:
    """Extract the text of fetched bytes. Unreadable documents raise InvalidInput(source).

    What a compressed document unpacks to is bounded too, at `UNPACK_FACTOR` × `max_bytes`
    (`knowledge.max_source_bytes`): a DOCX's or an EPUB's parts together, a PDF's extracted
    text. A DOCX of a megabyte can hold a part that inflates to gigabytes, and python-docx
    reads every part whole; an ordinary one unpacks to 5–25 times its size (the bare
    template: 36 kB to 830 kB), so the bound is on the whole, not on the ratio."""
    doc_type = detect_type(fetched)
    unpacked = UNPACK_FACTOR * max_bytes
    try:
        if doc_type is DocType.HTML:
            if len(fetched.data) > MARKUP_BYTES:
                raise Unpacked("the HTML", len(fetched.data), MARKUP_BYTES)
            title, text = html_text.title_and_text(decode_page(fetched.data, fetched.charset))
        elif doc_type is DocType.PDF:
            title, text = _pdf(fetched.data, unpacked, fetched.ref.uri)
        elif doc_type is DocType.DOCX:
            title, text = docx_text.title_and_text(fetched.data, unpacked, fetched.ref.uri)
        elif doc_type is DocType.EPUB:
            title, text = epub_text.title_and_text(fetched.data, unpacked, fetched.ref.uri)
        elif doc_type is DocType.ODT:
            title, text = odt_text.title_and_text(fetched.data, unpacked, fetched.ref.uri)
        elif doc_type is DocType.RTF:
            title, text = rtf_text.title_and_text(fetched.data, fetched.ref.uri)
        else:
            title, text = "", _decode(fetched.data, fetched.charset)
            if "\x00" in text:  # (UTF-16 with its BOM decodes to text without them)
                raise InvalidInput(
                    "source",
                    f"{fetched.ref.uri}: holds NUL bytes: binary content, not {doc_type.value}"
                    " (a program or an archive named as text is not indexed)",
                )
    except InvalidInput:
        raise
    except Unpacked as exc:
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
    markdown = doc_type is DocType.MARKDOWN
    return Document(fetched.ref.uri, _title(title) or first_title(text, markdown), doc_type, text)


def _title(title: str) -> str:
    """A document's own title as one line that leads every chunk header: without the format
    characters a word processor's metadata holds unseen (`Capacity\u200b Plan` printed as
    `Capacity Plan` and matched no search for it); "" when nothing of it shows."""
    title = " ".join(same_text_key(title).split())[:200]
    return title if shows_something(title) else ""


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


def first_title(text: str, markdown: bool = False) -> str:
    """The first markdown heading, else the first non-empty line (≤ 100 chars), else Untitled.

    In a `markdown` document, the first heading may be a setext one (`Title` over `=====`),
    and its front matter is not its first line."""
    if markdown:
        data = text.encode()
        first = first_heading(data, setext=True)
        if first:
            return first[:100]
        text = data[front_matter_end(data) :].decode()
    # Only lines that start with `#` are read for the heading: a pattern over the text was
    # quadratic, and a line loop read every line of a 6 MB file without one.
    for start in _hash_lines(text):
        end = text.find("\n", start)
        heading = _ATX.match(text[start:] if end < 0 else text[start:end])
        title = heading_text(heading.group(1).encode()).decode().strip() if heading else ""
        if shows_something(title):
            return title[:100]
    for line in _each_line(text):
        heading = _ATX.match(line)
        if heading and heading.group(1).strip() and not shows_something(heading.group(1)):
            continue  # a heading that shows nothing is no title either
        if line.strip() and shows_something(line):
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


# ---- PDF ------------------------------------------------------------------------------------


def _pdf(data: bytes, max_bytes: int, uri: str) -> tuple[str, str]:
    from pypdf import apply_configuration

    with (
        pdf_notices.gathered(uri),
        apply_configuration(stream_parsing_work_maximum_count=PDF_PAGE_TOKENS),
    ):
        return _pdf_text(data, max_bytes, uri)


class _OutOfTime(BaseException):
    """`PDF_SECONDS` passed while pypdf read a page. (Not an `Exception`: pypdf reads on past
    any `Exception` raised inside a form, as a form it cannot decode.)"""


class _TooManyTokens(BaseException):
    """A page's streams together hold over `PDF_PAGE_TOKENS` tokens (as `_OutOfTime`)."""


@dataclass
class _Bounds:
    """The time left to read one PDF, and the tokens of the page being read."""

    deadline: float
    tokens: int = 0
    streams: pdf_streams.PageStreams = field(init=False)  # measured before pypdf parses them

    def __post_init__(self) -> None:
        self.streams = pdf_streams.PageStreams(self.in_time)

    def in_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OutOfTime

    def operator(self, op: object, operands: list[object], *_: object) -> None:
        """Before each operator pypdf reads, a form's too (each time the form is drawn)."""
        if op == b"Do" and operands:
            self.streams.drawing(operands)
        self.tokens += 1 + len(operands)
        if self.tokens > PDF_PAGE_TOKENS:
            raise _TooManyTokens
        self.in_time()

    def operator_done(self, op: object, operands: list[object], *_: object) -> None:
        """After each operator pypdf read: after a `Do`, its form's drawing is done."""
        if op == b"Do" and operands:
            self.streams.drawn(operands)


# How pypdf's `LimitReachedError` starts when a stream holds over `PDF_PAGE_TOKENS` tokens
# (`stream_parsing_work_maximum_count`: "… tokens per stream.", or "… tokens." inside an
# array or a dictionary); its other limits (an array's elements, a filter's columns, …) are
# named as pypdf names them.
_PYPDF_TOKENS = "Reached maximum number of tokens"


def _why_left_out(exc: BaseException) -> str:
    """Why a page's text is left out, after "page 3 of the PDF": the bound it is over."""
    if isinstance(exc, pdf_streams.StreamTooLarge):
        return str(exc)
    if isinstance(exc, _TooManyTokens) or str(exc).startswith(_PYPDF_TOKENS):
        return f"has over {PDF_PAGE_TOKENS} drawing tokens"
    return f"reaches a limit of pypdf's ({client_text(str(exc).rstrip('.'), 200)})"


def _pdf_text(data: bytes, max_bytes: int, uri: str) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    listed = min(2_000_000, max(PDF_XREF_ENTRIES, len(data) // PDF_XREF_BYTES))  # (≤ pypdf's)
    reader = PdfReader(io.BytesIO(data), xref_stream_maximum_entries=listed)
    if reader.is_encrypted and not reader.decrypt(""):
        raise InvalidInput("source", f"{uri}: the PDF is encrypted with a password")
    pages: list[str] = []
    size = 0
    left_out: list[str] = []  # why each page left out was
    bounds = _Bounds(time.monotonic() + PDF_SECONDS)
    try:
        for number, page in enumerate(reader.pages, 1):  # pypdf bounds each stream it inflates
            bounds.tokens = 0
            try:
                bounds.streams.check(page)
                visitor = pdf_pieces.PageText()
                text = page.extract_text(
                    visitor_text=visitor,
                    visitor_operand_before=bounds.operator,
                    visitor_operand_after=bounds.operator_done,
                )
                bounds.in_time()  # (before layout mode reads the page again)
                text = visitor.text(text or "")
                pages.append(pdf_columns.with_cells(page, text, visitor.whole_lines()))
            except (LimitReachedError, _TooManyTokens, pdf_streams.StreamTooLarge) as exc:
                left_out.append(_why_left_out(exc))
                log.warning("page %d of the PDF %s: its text is left out", number, left_out[-1])
                pages.append("")
            size += len(pages[-1])
            if size > max_bytes:
                raise Unpacked("its text", size)
            bounds.in_time()
    except _OutOfTime:
        raise InvalidInput(
            "source",
            f"{uri}: the PDF's text was not out within {PDF_SECONDS:g} s ({len(pages)} of "
            f"{len(reader.pages)} pages read); nothing was indexed",
        ) from None
    if left_out and not any(p.strip() for p in pages):
        raise InvalidInput(
            "source",
            f"{uri}: every page of the PDF with text {' or '.join(dict.fromkeys(left_out))} "
            f"({len(left_out)} of {len(pages)}); nothing was indexed",
        )
    if not any(p.strip() for p in pages):
        raise InvalidInput(
            "source",
            f"{uri}: the PDF's {len(pages)} page(s) hold no text (only images, as a scan's "
            "pages are: make its text searchable first, e.g. `ocrmypdf`); nothing was indexed",
        )
    meta = reader.metadata
    title = str(meta.title) if meta is not None and meta.title else ""
    return title, pdf_text.tidy(reader, pages)
