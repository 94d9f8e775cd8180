"""The bounds on what a document unpacks to, and the error past one: the markup parsed into
one tree (an HTML page, a DOCX's XML parts together) and a packed document's whole size; an
XML part of a zipped document read within them."""

from __future__ import annotations

from typing import Any
from zipfile import ZipFile, ZipInfo

# The most markup parsed into one tree: an HTML page, a DOCX's XML parts together. A tree
# costs 40–90 times its markup in memory and about 3 s a megabyte on a 2-core machine (lxml
# and readability for HTML, python-docx), so a 1 MB DOCX of 40 MB of empty paragraphs, or a
# 50 MB page, once took minutes and gigabytes. A long report's document.xml is 1–5 MB.
MARKUP_BYTES = 6 << 20


# The most bytes a zipped document's list of its files (the zip's central directory) may take:
# zipfile reads it whole, an object per file, before any is looked at (a 50 MB zip of 600,000
# empty files took 8.6 s and 440 MB to open). A file takes 46 bytes and its name there: a book
# of thousands of chapters and images lists them in well under a megabyte.
PACKAGE_DIRECTORY_BYTES = 4 << 20


class Unpacked(Exception):
    """A document that unpacks to more than the size cap."""

    def __init__(self, what: str, size: int, bound: int = 0) -> None:
        super().__init__(what)
        self.size = size
        self.bound = bound  # 0: the unpack bound


def open_package(data: bytes, uri: str, kind: str) -> ZipFile:
    """`data` (a zipped document: `kind` "EPUB", "ODT", "DOCX" at `uri`) opened, its list of
    files measured before zipfile reads it: InvalidInput naming `uri` past
    `PACKAGE_DIRECTORY_BYTES`. (Not a zip: zipfile's own error, as before.)"""
    import io
    import zipfile

    from octobrain.errors import InvalidInput

    # (what ZipFile itself reads the list's size from, then reads that many bytes of)
    end = zipfile._EndRecData(io.BytesIO(data))  # type: ignore[attr-defined]
    listed = int(end[zipfile._ECD_SIZE]) if end else 0  # type: ignore[attr-defined]
    if listed > PACKAGE_DIRECTORY_BYTES:
        raise InvalidInput(
            "source",
            f"{uri}: cannot read this {kind}: its zip lists its files in {listed} bytes, over "
            f"the {PACKAGE_DIRECTORY_BYTES}-byte bound (knowledge/unpacked."
            "PACKAGE_DIRECTORY_BYTES; a document's list takes kilobytes); nothing was indexed",
        )
    return ZipFile(io.BytesIO(data))


def package_xml(package: ZipFile, named: dict[str, ZipInfo], name: str, uri: str, kind: str) -> Any:
    """The root of the XML entry `name` of a zipped document (`kind`: "EPUB", "ODT") at
    `uri`, parsed without entities or the network; `Unpacked` past `MARKUP_BYTES`, and
    InvalidInput naming `uri` for an entry missing or not well-formed."""
    import lxml.etree

    from octobrain.errors import InvalidInput

    entry = named.get(name)
    if entry is None:
        raise InvalidInput("source", f"{uri}: cannot read this {kind}: it has no {name}")
    if entry.file_size > MARKUP_BYTES:
        raise Unpacked(f"the {kind}'s {name}", entry.file_size, MARKUP_BYTES)
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        return lxml.etree.fromstring(package.read(entry), parser=parser)
    except lxml.etree.XMLSyntaxError as exc:
        raise InvalidInput(
            "source", f"{uri}: cannot read this {kind}: its {name} is not well-formed XML ({exc})"
        ) from None
