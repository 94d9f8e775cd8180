"""Hostile documents: every extraction path stays about linear in what it is given."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import parse_source, read_file


def _text(path: Path) -> str:
    return extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20).text


def _save(document: Any, path: Path, edit: Callable[[bytes], bytes] = lambda xml: xml) -> Path:
    """Save a python-docx document, its `word/document.xml` passed through `edit`."""
    saved = io.BytesIO()
    document.save(saved)
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part)
            out.writestr(
                part.filename, edit(body) if part.filename == "word/document.xml" else body
            )
    return path


def _table(rows: list[list[str]]) -> Any:
    import docx

    document = docx.Document()
    document.add_paragraph("Before the table.")
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    document.add_paragraph("After the table.")
    return document


def test_docx_merged_cells_read_once_in_document_order(tmp_path: Path) -> None:
    document = _table([["", "", "Total"], ["eu-west", "platform", ""], ["us-east", "data", ""]])
    table = document.tables[0]
    table.cell(0, 0).merge(table.cell(0, 1)).text = "Team budget"
    table.cell(1, 2).merge(table.cell(2, 2)).text = "12"
    document.add_heading("Notes", level=1)
    text = _text(_save(document, tmp_path / "merged.docx"))
    # python-docx's row.cells gave "Team budget | Team budget | Total" and "us-east | data | 12"
    assert text == (
        "Before the table.\n\nTeam budget | Total\n\neu-west | platform | 12\n\n"
        "us-east | data |\n\nAfter the table.\n\n# Notes"
    )


def test_docx_a_huge_grid_span_is_one_cell(tmp_path: Path) -> None:
    # A 37 kB file: python-docx's row.cells repeated the cell 3,000,000 times (120 s, 388 MB).
    def span(xml: bytes) -> bytes:
        return xml.replace(b"<w:tcPr>", b'<w:tcPr><w:gridSpan w:val="3000000"/>', 1)

    document = _table([["wide", "narrow"], ["a", "b"]])
    text = _text(_save(document, tmp_path / "span.docx", span))
    assert text == "Before the table.\n\nwide | narrow\n\na | b\n\nAfter the table."


def test_docx_a_chain_of_vertically_merged_cells_is_read_once(tmp_path: Path) -> None:
    # 200 rows of 20 cells each merged with the one above: python-docx walked up the rows for
    # every cell (70 s) and repeated the top row's text 200 times.
    def merge_down(xml: bytes) -> bytes:
        first = xml.index(b"<w:tr")
        second = xml.index(b"<w:tr", first + 1)
        end = xml.index(b"</w:tbl>")
        top = xml[first:second].replace(b"<w:tcPr>", b'<w:tcPr><w:vMerge w:val="restart"/>')
        below = xml[second:end].replace(b"<w:tcPr>", b"<w:tcPr><w:vMerge/>")
        return xml[:first] + top + below * 199 + xml[end:]

    tops = [f"top{c}" for c in range(20)]
    document = _table([tops, ["own text"] + [""] * 19])  # a merged cell's own text is kept
    text = _text(_save(document, tmp_path / "vmerge.docx", merge_down))
    below = " | ".join(["own text"] + [""] * 19).rstrip()
    assert text == "\n\n".join(
        ["Before the table.", " | ".join(tops), *[below] * 199, "After the table."]
    )


def test_docx_with_too_many_table_cells_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import extract as extraction

    path = _save(_table([["a", "b", "c"]] * 4), tmp_path / "cells.docx")
    assert _text(path).count("a | b | c") == 4
    monkeypatch.setattr(extraction, "DOCX_TABLE_CELLS", 15)  # 4 rows + 12 cells: one too many
    with pytest.raises(InvalidInput, match=r"^source: the DOCX's tables have over 15 rows and"):
        _text(path)
