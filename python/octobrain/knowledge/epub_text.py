"""EPUB books: the text of the documents a book's spine orders, a section each, titled as its
package's metadata says, read within the bounds on what the zip unpacks to.

An EPUB is a zip: `META-INF/container.xml` names the package (OPF) file, whose `<spine>`
orders the XHTML documents of its `<manifest>`, and whose `<metadata>` holds `dc:title`. Each
document is read by the HTML reader (`html_text.py`), whole; the navigation document, the
spine's non-linear items (`linear="no"`: notes, pop-ups) and images are left out."""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from octobrain.errors import InvalidInput, as_json
from octobrain.knowledge import html_text
from octobrain.knowledge.charset import decode_page
from octobrain.knowledge.unpacked import MARKUP_BYTES, Unpacked, open_package, package_xml
from octobrain.safe_text import shows_something

# The most entries an EPUB's zip may list: a long illustrated book has a few thousand (a
# document per chapter, an image per plate); each costs a lookup, and a zip of millions of
# empty entries is no book.
EPUB_ENTRIES = 20_000
# The most XHTML the spine's documents hold together: each is parsed into its own tree (at
# most `MARKUP_BYTES`), at about 3 s a megabyte. War and Peace is 5 MB of XHTML.
EPUB_MARKUP_BYTES = 4 * MARKUP_BYTES

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_DOCUMENT_TYPES = ("application/xhtml+xml", "text/html")
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"


def title_and_text(data: bytes, max_bytes: int, uri: str) -> tuple[str, str]:
    """The title (`dc:title`) and text of an EPUB: its spine's linear documents in order, each
    a section (`#` lines for its headings; its `<title>` as one when it has none);
    `Unpacked` when the zip would unpack past `max_bytes`; InvalidInput, naming `uri`, for
    a book that cannot be read or whose documents hold over `EPUB_MARKUP_BYTES`."""
    with open_package(data, uri, "EPUB") as book:  # an entry never inflates past its size
        entries = book.infolist()
        if len(entries) > EPUB_ENTRIES:
            raise _unread(uri, f"its zip lists {len(entries)} entries, over {EPUB_ENTRIES}")
        size = sum(entry.file_size for entry in entries)
        if size > max_bytes:
            raise Unpacked("the EPUB package", size)
        named = {entry.filename: entry for entry in entries}
        package = _package_path(uri, _xml(book, named, _CONTAINER, uri))
        opf = _xml(book, named, package, uri)
        documents = _spine_documents(uri, opf, posixpath.dirname(package), named)
        _refuse_encrypted(book, named, documents, uri)
        markup = sum(named[name].file_size for name in documents)
        if markup > EPUB_MARKUP_BYTES:
            raise InvalidInput(
                "source",
                f"{uri}: the EPUB's documents hold {markup} bytes of XHTML, over the "
                f"{EPUB_MARKUP_BYTES}-byte bound (knowledge/epub_text.EPUB_MARKUP_BYTES); "
                "nothing was indexed",
            )
        title = _book_title(opf)
        labels = _toc_labels(book, named, opf, posixpath.dirname(package), uri)
        sections = [
            _section(book.read(named[name]), title, labels.get(name, ""), at > 0)
            for at, name in enumerate(documents)
        ]
    text = "\n\n".join(s for s in sections if s)
    if not shows_something(text):
        raise _unread(uri, f"its {len(documents)} document(s) hold no text; nothing was indexed")
    return title, text


def _unread(uri: str, why: str) -> InvalidInput:
    return InvalidInput("source", f"{uri}: cannot read this EPUB: {why}")


def _xml(book: zipfile.ZipFile, named: dict[str, zipfile.ZipInfo], name: str, uri: str) -> Any:
    """The root of the XML entry `name`, parsed without entities or the network."""
    return package_xml(book, named, name, uri, "EPUB")


def _inside(uri: str, base: str, href: str) -> str:
    """The zip entry `href` (relative to the folder `base`) names; refused when it leads out
    of the zip (`..` past its root, or an absolute path)."""
    path = unquote(href.split("#", 1)[0])
    joined = posixpath.normpath(posixpath.join(base, path)) if path else ""
    if not joined or path.startswith("/") or joined == ".." or joined.startswith("../"):
        raise _unread(uri, f"the path {as_json(href)} leads out of the book")
    return joined


def _package_path(uri: str, container: Any) -> str:
    for rootfile in container.iter("{*}rootfile"):
        if rootfile.get("full-path"):
            return _inside(uri, "", str(rootfile.get("full-path")))
    raise _unread(uri, f"its {_CONTAINER} names no package (rootfile full-path)")


def _spine_documents(uri: str, opf: Any, base: str, named: dict[str, zipfile.ZipInfo]) -> list[str]:
    """The entries of the spine's linear XHTML documents, in order, the navigation document
    left out."""
    items = {}
    for item in opf.iterfind("{*}manifest/{*}item"):
        properties = str(item.get("properties", "")).split()
        media = str(item.get("media-type", ""))
        if item.get("id") and item.get("href") and "nav" not in properties:
            items[str(item.get("id"))] = (str(item.get("href")), media)
    spine = opf.find("{*}spine")
    if spine is None:
        raise _unread(uri, "its package has no <spine>")
    itemrefs = spine.findall("{*}itemref")
    if len(itemrefs) > EPUB_ENTRIES:  # (a book's spine names each of its documents once)
        raise _unread(uri, f"its spine lists {len(itemrefs)} items, over {EPUB_ENTRIES}")
    documents: dict[str, None] = {}  # (in order; looked up in a list, 150,000 took 50 s)
    for itemref in itemrefs:
        found = items.get(str(itemref.get("idref", "")))
        if found is None or itemref.get("linear") == "no" or found[1] not in _DOCUMENT_TYPES:
            continue
        name = _inside(uri, base, found[0])
        if name not in named:
            raise _unread(uri, f"its spine names {as_json(found[0])}, which the zip does not hold")
        documents.setdefault(name)
    if not documents:
        raise _unread(uri, "its spine names no XHTML document")
    return list(documents)


def _refuse_encrypted(
    book: zipfile.ZipFile, named: dict[str, zipfile.ZipInfo], documents: list[str], uri: str
) -> None:
    """Refuse a book whose documents are encrypted (DRM); fonts obfuscated as the standard
    allows are no matter."""
    if _ENCRYPTION not in named:
        return
    encryption = _xml(book, named, _ENCRYPTION, uri)
    wanted = set(documents)
    for reference in encryption.iter("{*}CipherReference"):
        if _inside(uri, "", str(reference.get("URI", ""))) in wanted:
            raise InvalidInput(
                "source",
                f"{uri}: the EPUB's documents are encrypted (DRM, {_ENCRYPTION}); it cannot "
                "be read: nothing was indexed",
            )


def _book_title(opf: Any) -> str:
    for element in opf.iterfind(f"{{*}}metadata/{_DC_TITLE}"):
        title = " ".join("".join(element.itertext()).split())
        if shows_something(title):
            return title
    return ""


def _section(markup: bytes, book_title: str, label: str, after: bool) -> str:
    """One document's text, led by a `#` line: its own first heading, else its `<title>`
    unless that is only the book's, else its entry in the table of contents (`label`), else,
    `after` another document, the book's title: a chapter titled only by the book's title
    was read as more of the chapter before it."""
    title, text = html_text.title_and_text(decode_page(markup), whole=True)
    if text.startswith("#") or not shows_something(text):
        return text
    heading = title if title and title != book_title else label or (book_title if after else "")
    return f"# {heading}\n\n{text}" if heading else text


def _toc_labels(
    book: zipfile.ZipFile, named: dict[str, zipfile.ZipInfo], opf: Any, base: str, uri: str
) -> dict[str, str]:
    """The first label the table of contents gives each document (entry name → label): the
    navigation document's links (EPUB 3), else the NCX's nav points (EPUB 2); none from a
    table of contents that cannot be read (the text does not need it)."""
    items = {str(i.get("id")): i for i in opf.iterfind("{*}manifest/{*}item")}
    spine = opf.find("{*}spine")
    ncx = items.get(str(spine.get("toc"))) if spine is not None else None
    navs = [i for i in items.values() if "nav" in str(i.get("properties", "")).split()]
    labels: dict[str, str] = {}
    for item, links in [*((n, _nav_links) for n in navs), *(((ncx, _ncx_links),) if ncx else ())]:
        try:
            path = _inside(uri, base, str(item.get("href", "")))
            root = _xml(book, named, path, uri)
            for label, href in links(root):
                target = _inside(uri, posixpath.dirname(path), href)
                if shows_something(label):
                    labels.setdefault(target, " ".join(label.split()))
        except (InvalidInput, Unpacked):
            continue
        if labels:
            break
    return labels


def _nav_links(root: Any) -> Iterator[tuple[str, str]]:
    for link in root.iter("{*}a"):
        # (a link inside a link is read with it: each read its nested ones' text again)
        if link.get("href") and next(link.iterancestors("{*}a"), None) is None:
            yield "".join(link.itertext()), str(link.get("href"))


def _ncx_links(root: Any) -> Iterator[tuple[str, str]]:
    for point in root.iter("{*}navPoint"):
        text, content = point.find("{*}navLabel/{*}text"), point.find("{*}content")
        if text is not None and content is not None and content.get("src"):
            yield "".join(text.itertext()), str(content.get("src"))
