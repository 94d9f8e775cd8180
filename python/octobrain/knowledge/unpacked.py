"""The bounds on what a document unpacks to, and the error past one: the markup parsed into
one tree (an HTML page, a DOCX's XML parts together) and a packed document's whole size."""

from __future__ import annotations

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
