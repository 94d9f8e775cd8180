"""Regex line matching: Rust == `re` reference on shared syntax, caps, lines, errors."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.kernels.regex_match import LineMatch, TimeLimitExceeded, match_lines
from tests.core import reference

ALPHABET = "abcAB é1.(*\r\n"
META = set(r"\.+*?()|[]{}^$")


def escape(literal: str) -> str:
    """Escape only regex metacharacters: valid, and equal in meaning, in both engines."""
    return "".join("\\" + c if c in META else c for c in literal)


atoms = st.one_of(
    st.text(alphabet="abcAé1.(*", min_size=1, max_size=3).map(escape),
    st.sampled_from(["[a-c]", r"\d", ".", "a+", "b?", "[^a ]", r"\.", "é+"]),
)
sequences = st.lists(atoms, min_size=1, max_size=4).map("".join)
patterns = st.builds(
    lambda alternatives, start, end: (
        ("^" if start else "") + "(?:" + "|".join(alternatives) + ")" + ("$" if end else "")
    ),
    st.lists(sequences, min_size=1, max_size=3),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, max_size=40), max_size=6),
    pattern=patterns,
    ignore_case=st.booleans(),
    max_matches=st.integers(1, 12),
    context=st.integers(0, 2),
)
def test_matches_reference(
    texts: list[str], pattern: str, ignore_case: bool, max_matches: int, context: int
) -> None:
    got = match_lines(
        texts, pattern, ignore_case=ignore_case, max_matches=max_matches, context=context
    )
    want, truncated = reference.match_lines(texts, pattern, ignore_case, max_matches, context)
    assert [tuple(m) for m in got.matches] == want
    assert got.truncated == truncated


def test_cap_stops_in_text_order_and_flags() -> None:
    texts = ["hit\nmiss\nhit", "hit", "hit"]
    r = match_lines(texts, "hit", max_matches=3)
    assert [(m.text_index, m.line_number) for m in r.matches] == [(0, 1), (0, 3), (1, 1)]
    assert r.truncated
    r = match_lines(texts, "hit", max_matches=4)
    assert len(r.matches) == 4
    assert not r.truncated


def test_line_numbers_across_crlf_and_spans_in_characters() -> None:
    text = "first\r\nsecond\r\n\r\nnaïve café ☕ x\r\n"
    (m,) = match_lines([text], r"café \S+").matches
    assert m == LineMatch(0, 4, "naïve café ☕ x", 6, 12, [], [])
    assert m.line[m.start : m.end] == "café ☕"
    assert match_lines([text], "^$").matches[0].line_number == 3
    assert len(match_lines([text], "^").matches) == 4  # no phantom line after the last \n


def test_ignore_case_is_unicode_aware() -> None:
    r = match_lines(["ÉCOLE", "école"], "école", ignore_case=True)
    assert [m.text_index for m in r.matches] == [0, 1]
    assert len(match_lines(["ÉCOLE"], "école").matches) == 0


def test_context_lines_come_from_the_same_text() -> None:
    (m,) = match_lines(["a\nb\nTARGET\nc", "z"], "TARGET", context=5).matches
    assert (m.before, m.after) == (["a", "b"], ["c"])


def test_context_lines_are_cut_to_context_chars() -> None:
    # `knowledge match` shows 400 characters of a context line, but each whole line came back
    # once per match it surrounds: a text of 10 kB lines, all matching, took 21× its size.
    (m,) = match_lines(["é" * 500 + "\nhit\nab"], "hit", context=1, context_chars=3).matches
    assert (m.line, m.before, m.after) == ("hit", ["ééé"], ["ab"])


def test_catastrophic_backtracking_pattern_is_answered_correctly() -> None:
    line = "a" * 100_000 + "b"
    assert match_lines([line, "aaaa"], "(a+)+$").matches == [LineMatch(1, 1, "aaaa", 0, 4, [], [])]


def test_a_hostile_pattern_in_one_long_line_stops_at_the_time_limit() -> None:
    # One 1 MB line of random a/b: the limit was only checked between lines, and this took
    # minutes (the lazy DFA cannot keep its states, so every byte costs the whole program).
    line = "".join(random.Random(7).choices("ab", k=1_000_000))
    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded) as caught:
        match_lines([line], "[ab]*a[ab]{3000}z", seconds=0.3)
    took = time.monotonic() - started
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(
        "pattern: took more than 0.3 s, stopped in text 1 of 1; use a simpler pattern"
    )
    assert 0.3 <= took < 5  # minutes without the bound; slack for a loaded machine


@pytest.mark.parametrize("seconds", [1.5e19, 1e300])
def test_a_time_limit_too_long_to_reach_is_no_limit(seconds: float) -> None:
    # Both raised PanicException (a BaseException): too big for a Duration, or for the clock.
    assert len(match_lines(["a"], "a", seconds=seconds).matches) == 1


def test_invalid_pattern_names_pattern_with_engine_message() -> None:
    with pytest.raises(ValueError, match=r"^pattern: (?s:.*)unclosed group"):
        match_lines(["x"], "(abc")
    with pytest.raises(ValueError, match=r"^pattern: (?s:.*)look-around"):
        match_lines(["x"], "(?=x)")


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        ("(?P<x>a)(?P=x)", "(?P=x)"),  # Python's
        (r"(?<x>a)\k<x>", r"\k<x>"),
        (r"(a)\g{1}", r"\g{1}"),
        (r"(a)\1", None),  # the engine says so itself
    ],
)
def test_a_backreference_is_refused_as_one(pattern: str, named: str | None) -> None:
    # `(?P=x)` was "unrecognized flag" and `\k<x>` "unrecognized escape sequence": nothing
    # told a Python user that the engine has no backreferences.
    with pytest.raises(ValueError, match=r"^pattern: (?s:.*)backreferences are not supported") as e:
        match_lines(["aa"], pattern)
    assert named is None or f"({named} matches what a group matched" in str(e.value)


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (
            "(?>a*)a",
            "atomic groups are not supported ((?>…) keeps what it first matched; write (?:…)",
        ),
        ("(a)?(?(1)b|c)", "conditionals are not supported ((?(1)…) picks a branch"),
        (r"\((?:[^()]|(?R))*\)", "recursion is not supported ((?R) matches a pattern inside"),
        ("(?<x>a(?&x)?b)", "recursion is not supported ((?&x) matches"),
        (r"ab\Kc", r"\K is not supported (\K leaves what matched before it out of the match"),
        ("a*+a", "possessive quantifiers are not supported (*+ gives nothing back; write *:"),
        ("a{2}+", "possessive quantifiers are not supported ({2}+ gives nothing back; write {2}:"),
        ("a(?#note)b", "comment groups are not supported ((?#…); leave the comment out, or "),
        ("(?|a(b)|c(d))", "branch reset groups are not supported ((?|…) numbers each branch's"),
    ],
)
def test_a_construct_that_needs_backtracking_is_refused_by_name(pattern: str, said: str) -> None:
    # Each was "unrecognized flag" or "unrecognized escape sequence", or (`(?R)`, `a*+`)
    # accepted as something else: `a*+a` matched "aa", which Python's `re` never matches.
    with pytest.raises(ValueError, match=r"^pattern: invalid regular expression: ") as e:
        match_lines(["aa", "(ab)", "abc", "ac"], pattern)
    assert said in str(e.value)


@pytest.mark.parametrize(
    "pattern",
    [r"[*+]+", r"\*+", r"\x{2A}+", r"[[:punct:]*+]", r"\\K", "[x[y]*+]", "[x[^]*+]]", "[]*+]"],
)
def test_an_escaped_or_bracketed_quantifier_is_no_construct(pattern: str) -> None:
    # A nested class (`[x[y]*+]`) is one class to the engine: its `*+` was refused as a
    # possessive quantifier.
    assert match_lines(["a*+ \\K"], pattern).matches


def test_an_escaped_backslash_is_no_backreference() -> None:
    with pytest.raises(ValueError, match=r"^pattern: (?s:.*)unrecognized flag"):
        match_lines(["x"], r"\\k<x>(?y)")


def test_oversized_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^pattern: (?s:.*)size limit"):
        match_lines(["x"], r"\w{1000}{1000}")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"texts": "just one string"}, "texts"),
        ({"texts": ["ok", 3]}, "texts"),
        ({"pattern": b"x"}, "pattern"),
        ({"max_matches": 0}, "max_matches"),
        ({"max_matches": -1}, "max_matches"),
        ({"max_matches": 1.5}, "max_matches"),
        ({"context": -1}, "context"),
        ({"context_chars": -1}, "context_chars"),
        ({"context_chars": 1.5}, "context_chars"),
    ],
)
def test_errors_name_the_argument(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"texts": ["x"], "pattern": "x"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{field}: "):
        match_lines(**args)  # type: ignore[arg-type]
