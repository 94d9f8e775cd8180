"""Regex line matching over 5k documents: octobrain (Rust `regex`, one call) vs a Python `re`
loop over lines (what a user writes). Both scan everything (cap above the match count).

Run: .venv/bin/pytest benches/bench_regex.py --benchmark-only
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from octobrain.kernels.regex_match import match_lines

N_DOCS, LINES_PER_DOC, WORDS_PER_LINE = 5_000, 40, 10
CAP = 10**7
PATTERNS = {
    "literal": ("consolidation", False),
    "alternation, ignore case": (r"\b(?:error|warn(?:ing)?|fail(?:ed|ure)?)\b", True),
    "dates": (r"\b\d{4}-\d{2}-\d{2}\b", False),
}


def make_docs(seed: int = 7) -> list[str]:
    """Word-salad documents (~2 KB, CRLF in a fifth of them) with rare target words."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{k}x" for k in range(5_000)] + ["Error", "warning", "2024-05-17", "consolidation"]
    weights = np.ones(len(vocab))
    weights[-4:] = 2.0  # targets: ~1 in 600 words
    weights /= weights.sum()
    words = rng.choice(len(vocab), size=(N_DOCS, LINES_PER_DOC, WORDS_PER_LINE), p=weights)
    docs = []
    for d in range(N_DOCS):
        newline = "\r\n" if d % 5 == 0 else "\n"
        lines = (" ".join(vocab[w] for w in line) for line in words[d])
        docs.append(newline.join(lines))
    return docs


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return make_docs()


def python_match(texts: list[str], pattern: str, ignore_case: bool) -> list[tuple[int, int, str]]:
    """Baseline: compile once, split lines, search each line."""
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found = []
    for ti, text in enumerate(texts):
        for li, line in enumerate(text.split("\n"), start=1):
            line = line.removesuffix("\r")
            m = rx.search(line)
            if m is not None:
                found.append((ti, li, line))
    return found


@pytest.mark.parametrize("name", list(PATTERNS))
def test_octobrain(benchmark: Any, docs: list[str], name: str) -> None:
    pattern, ignore_case = PATTERNS[name]
    benchmark.group = f"regex match 5k docs: {name}"
    benchmark.extra_info["impl"] = "octobrain"
    result = benchmark(match_lines, docs, pattern, ignore_case=ignore_case, max_matches=CAP)
    benchmark.extra_info["matches"] = len(result.matches)
    assert [(m.text_index, m.line_number) for m in result.matches] == [
        (ti, li) for ti, li, _ in python_match(docs, pattern, ignore_case)
    ]


@pytest.mark.parametrize("name", list(PATTERNS))
def test_python_re(benchmark: Any, docs: list[str], name: str) -> None:
    pattern, ignore_case = PATTERNS[name]
    benchmark.group = f"regex match 5k docs: {name}"
    benchmark.extra_info["impl"] = "python-re"
    found = benchmark(python_match, docs, pattern, ignore_case)
    benchmark.extra_info["matches"] = len(found)
