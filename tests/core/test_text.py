"""Parity of the Rust analyser with the Python reference, plus behaviour and error tests."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.text import analyze
from tests.core import reference_text as ref

# Characters exercising every rule the analyser has: UAX #29 joins (' . , : _ digits letters),
# newlines, combining marks (NFD input), folding (accents, ligatures, fullwidth, roman
# numerals, dotted capital I), scripts kept as they are (Greek with final sigma, Cyrillic,
# CJK, Hiragana), and invisible format characters.
ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " .,;:'_-/!?()\"\n\r\t+#"
    "éèêëàâäöüçñÉÀÖÜßæ\u0301\u0300\u0308\u0327"
    "αβγδεσςΣΟΔάέΑабвгдЖЗИ漢字中文ひらがな"
    "ﬁﬂＡＢａｂ１２\u2019\u2018·\u00a0\u200b\u200dⅫⅻ²µİ"
)
WORDS = ["the", "running", "cells", "café", "don't", "3.14", "is", "a_b", "Ελλάδα", "x"]
WORDS += ["max_connections", "pgbouncer.ini", "os.path", "v2.3", "e.g.", "__init__", "été_été"]
WORDS += ["C++", "C#", "F#", "g++", "c++11", "#rust", "A+", "issue#42"]
texts = st.text(alphabet=ALPHABET, max_size=40) | st.lists(st.sampled_from(WORDS)).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=5), st.booleans(), st.booleans())
def test_tokens_equal_reference(batch: list[str], stem: bool, stopwords: bool) -> None:
    expected = [ref.analyze_text(t, stem=stem, stopwords=stopwords) for t in batch]
    assert analyze(batch, stem=stem, stopwords=stopwords) == expected


def _scifact() -> Path:
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "scifact"
    return Path(os.environ.get("OCTOBRAIN_SCIFACT", default))


def test_tokens_equal_reference_on_real_abstracts() -> None:
    corpus = _scifact() / "corpus.jsonl.gz"
    if not corpus.exists():
        pytest.skip(f"SciFact corpus not found at {corpus} (set OCTOBRAIN_SCIFACT)")
    with gzip.open(corpus, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(150), f, strict=False)]
    batch = [f"{d['title']}. {d['text']}" for d in docs]
    assert analyze(batch) == [ref.analyze_text(t) for t in batch]


def test_pipeline_steps() -> None:
    text = "The Cafés are RUNNING into cells!"
    assert analyze([text]) == [["cafe", "run", "cell"]]
    assert analyze([text], stem=False) == [["cafes", "running", "cells"]]
    assert analyze([text], stopwords=False) == [["the", "cafe", "are", "run", "into", "cell"]]


def test_word_split_and_folding() -> None:
    assert analyze(["IL-6 p<0.05 don\u2019t e\u0301te\u0301 ﬁne"], stem=False) == [
        ["il", "6", "il6", "p", "0.05", "don't", "ete", "fine"]
    ]
    # Non-Latin scripts are kept, not transliterated; ideographs are one word each.
    assert analyze(["Ελλάδα 漢字"], stem=False) == [["ελλάδα", "漢", "字"]]


def test_hyphenated_compound_matches_its_other_spellings() -> None:
    """A query for `IL-6` finds `IL6` (and the reverse), and the parts still match alone."""
    doc, joined, spaced = analyze(["IL-6 levels", "IL6 levels", "IL 6"])
    assert set(doc) >= {"il", "6", "il6"} and "il6" in joined
    assert "il6" not in spaced  # words apart are not a compound
    assert analyze(["TNF-α anti-inflammatory"]) == [
        ["tnf", "alpha", "tnfalpha", "anti", "inflammatori", "antiinflammatori"]
    ]


def test_words_about_code_meet_the_identifier_that_holds_them() -> None:
    """`pgbouncer` finds `pgbouncer.ini` and `max connections` finds `max_connections`;
    numbers, versions and abbreviations stay whole."""
    doc = set(analyze(["Set max_connections in pgbouncer.ini for os.path.join"])[0])
    for query in ("pgbouncer", "max connections", "max_connections", "path join"):
        assert set(analyze([query])[0]) <= doc, query
    assert analyze(["v2.3.1 3.14 e.g. U.S."], stem=False) == [
        ["v2.3.1", "2.3.1", "3.14", "e.g", "u.s"]
    ]


def test_language_names_keep_their_marks() -> None:
    """`C++`, `C#` and `F#` were all the term `c` (or `f`): "Plan C" matched a C++ question."""
    assert analyze(["C++ C# F# g++ Plan C, c++11 #rust A+ issue#42"], stem=False) == [
        ["c++", "c#", "f#", "g++", "plan", "c", "c", "11", "rust", "issue", "42"]
    ]


def test_a_version_meets_its_number_with_or_without_its_v() -> None:
    """`1.2.3` finds "Release v1.2.3", and `v1.2.3` finds "release 1.2.3"; `1.2.30` neither."""
    with_v, without = (set(t) for t in analyze(["Release v1.2.3 shipped", "release 1.2.3"]))
    assert set(analyze(["1.2.3"])[0]) <= with_v and set(analyze(["V1.2.3"])[0]) & without
    assert not set(analyze(["1.2.30"])[0]) & (with_v | without)


def test_greek_symbols_meet_their_spelled_names() -> None:
    """`TNF-α` finds `TNF-alpha`, `NF-κB` finds `NF-kappaB`; Greek text keeps its letters."""
    symbols, names = analyze(["TNF-α NF-κB β-catenin", "TNF-alpha NF-kappaB beta-catenin"])
    assert symbols == names
    assert analyze(["Ελλάδα λόγος"], stem=False) == [["ελλάδα", "λόγος"]]


def test_empty_inputs() -> None:
    assert analyze([]) == []
    assert analyze(["", "   ", "the of and"]) == [[], [], []]


def test_errors_name_the_argument() -> None:
    with pytest.raises(InvalidInput, match=r"^texts: must be a sequence of strings"):
        analyze("a single string")
    with pytest.raises(ValueError, match=r"^texts: item 1 is int"):
        analyze(["ok", 3])  # type: ignore[list-item]
