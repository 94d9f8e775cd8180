"""What the extraction tests share: bytes written to a file, and the title, type and text
extraction makes of a file."""

from __future__ import annotations

from pathlib import Path

from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import parse_source, read_file


def extracted(path: Path) -> tuple[str, DocType, str]:
    doc = extract(read_file(parse_source(str(path)), 1_000_000), 1_000_000)
    return doc.title, doc.doc_type, doc.text


def written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
