"""Text cleanup of what knowledge reads (`extract.normalise`) on whitespace a hostile note or
file holds: a run of spaces that does not end a line (a valid 32 kB `knowledge store` note) and
lines of growing indentation. Linear: the pattern that strips each line's trailing blanks starts
only where a run starts.

Run: .venv/bin/pytest benches/bench_normalise.py --benchmark-only
"""

from __future__ import annotations

from typing import Any

import pytest

from octobrain.knowledge.extract import normalise

CASES = {
    "32,760 spaces then x (a note at its cap)": " " * 32_760 + "x",
    "1,000,000 spaces then x": " " * 1_000_000 + "x",
    "1,000 lines indented 0–999 spaces, then x": "".join(" " * i + "x\n" for i in range(1_000)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_normalise(benchmark: Any, name: str) -> None:
    benchmark.group = "normalise"
    benchmark.extra_info["case"] = name
    text = CASES[name]
    out = benchmark.pedantic(normalise, args=(text,), rounds=5, iterations=1)
    assert out.endswith("x")
