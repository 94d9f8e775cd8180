"""Knowledge indexing before the embedder: extraction (`extract.extract`) and chunking
(`chunk.chunk_text`) of large sources within the caps, and of an ordinary document.

- a 6 MB text file of 250,000 short lines (no heading: every line used to be read in Python);
- a 4 MB HTML page of 500,000 `<p>` (past `ARTICLE_ELEMENTS`, read without readability);
- a 50 kB markdown guide (sections of prose), so nothing ordinary gets slower.

Run: .venv/bin/pytest benches/bench_extract_chunk.py --benchmark-only
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octobrain.knowledge.chunk import chunk_text
from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import Fetched, parse_source, read_file

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while",
         "memory", "systems", "index", "text")  # fmt: skip


def _short_lines() -> str:
    return "".join(f"line {i} value {i * 7919 % 100_003}\n" for i in range(250_000))


def _paragraphs() -> str:
    return "<html><body>" + "<p>x</p>" * 500_000 + "</body></html>"


def _guide() -> str:
    parts = ["# Guide\n"]
    for section in range(60):
        parts.append(f"\n## Section {section}\n")
        for paragraph in range(3):
            words = (WORDS[(section * 7 + paragraph * 3 + k) % len(WORDS)] for k in range(50))
            parts.append("\n" + " ".join(words) + ".\n")
    return "".join(parts)


CASES = {
    "6 MB of 250,000 short lines (.txt)": ("log.txt", _short_lines),
    "4 MB page of 500,000 <p> (.html)": ("many.html", _paragraphs),
    "50 kB markdown guide (.md)": ("guide.md", _guide),
}
MAX_BYTES = 50 << 20


def _index_text(fetched: Fetched) -> int:
    doc = extract(fetched, MAX_BYTES)
    return len(chunk_text(doc.text, doc.title, max_chunks=10_000))


@pytest.mark.parametrize("name", list(CASES))
def test_extract_and_chunk(benchmark: Any, name: str, tmp_path: Path) -> None:
    benchmark.group = "extract + chunk"
    benchmark.extra_info["case"] = name
    file_name, make = CASES[name]
    path = tmp_path / file_name
    path.write_text(make())
    fetched = read_file(parse_source(str(path)), MAX_BYTES)
    chunks = benchmark.pedantic(_index_text, args=(fetched,), rounds=3, iterations=1)
    assert chunks > 0
