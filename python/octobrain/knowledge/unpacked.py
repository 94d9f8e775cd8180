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


class Unpacked(Exception):
    """A document that unpacks to more than the size cap."""

    def __init__(self, what: str, size: int, bound: int = 0) -> None:
        super().__init__(what)
        self.size = size
        self.bound = bound  # 0: the unpack bound


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
