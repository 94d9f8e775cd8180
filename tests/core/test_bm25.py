"""Parity of the Rust BM25 index with the Python reference, plus behaviour and error tests.

Tolerance: scores are float32 (the reference is float64), so they must agree within 1e-5
relative; rankings must be identical except between documents whose reference scores agree
within that tolerance (ties and float32 near-ties).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.kernels.bm25 import BM25Index
from tests.core import reference as ref
from tests.core.reference_text import analyze_text

REL = 1e-5
VOCAB = ["apple", "apples", "banana", "the", "cherry", "date", "éclair", "run", "running", "zeta"]

doc = st.lists(st.sampled_from(VOCAB), max_size=12).map(" ".join)
corpus = st.lists(doc, min_size=1, max_size=25)
query = st.lists(st.sampled_from([*VOCAB, "unknown"]), min_size=1, max_size=5).map(" ".join)
k1s = st.floats(min_value=0.0, max_value=3.0)
bs = st.floats(min_value=0.0, max_value=1.0)


def reference_hits(texts: list[str], q: str, k: int, k1: float, b: float) -> list[float]:
    docs = [analyze_text(t) for t in texts]
    return ref.bm25_scores(docs, analyze_text(q), k1=k1, b=b)


def assert_matches(
    positions: np.ndarray, scores: np.ndarray, expected: list[float], k: int, allowed=None
) -> None:
    candidates = [s if allowed is None or i in allowed else 0.0 for i, s in enumerate(expected)]
    want = ref.bm25_top_k(candidates, k)
    assert positions.dtype == np.int64 and scores.dtype == np.float32
    assert len(positions) == len(want)
    for got_pos, got_score, (want_pos, want_score) in zip(positions, scores, want, strict=True):
        assert math.isclose(got_score, want_score, rel_tol=REL)
        assert math.isclose(expected[got_pos], got_score, rel_tol=REL)
        if got_pos != want_pos:  # only allowed between (near-)tied documents
            assert math.isclose(expected[got_pos], expected[want_pos], rel_tol=REL)


@settings(max_examples=200, deadline=None)
@given(corpus, query, st.integers(1, 30), k1s, bs)
def test_search_equals_reference(texts: list[str], q: str, k: int, k1: float, b: float) -> None:
    index = BM25Index.build(texts, k1=k1, b=b)
    positions, scores = index.search(q, k)
    assert_matches(positions, scores, reference_hits(texts, q, k, k1, b), k)


# A wide vocabulary makes each term's postings cover a small share of the index, which takes
# the sparse (touched-positions) scoring path instead of the dense one.
RARE = [f"w{i}" for i in range(80)]
sparse_corpus = st.lists(st.lists(st.sampled_from(RARE), max_size=4).map(" ".join), min_size=20)


@settings(max_examples=100, deadline=None)
@given(sparse_corpus, st.lists(st.sampled_from(RARE), min_size=1, max_size=3).map(" ".join))
def test_sparse_search_equals_reference(texts: list[str], q: str) -> None:
    positions, scores = BM25Index.build(texts).search(q, 5, allowed=range(0, len(texts), 2))
    expected = reference_hits(texts, q, 5, 1.2, 0.75)
    assert_matches(positions, scores, expected, 5, allowed=set(range(0, len(texts), 2)))


@settings(max_examples=150, deadline=None)
@given(st.one_of(corpus, sparse_corpus), st.data())
def test_ties_go_by_the_keys_given_as_a_sort_of_every_hit_would_order_them(
    texts: list[str], data: st.DataObject
) -> None:
    # Few words, so that many documents score alike; keys a random order of the positions.
    index = BM25Index.build(texts)
    q = data.draw(st.sampled_from([*VOCAB, *RARE[:3]]))
    k = data.draw(st.integers(1, len(texts)))
    ties = np.asarray(data.draw(st.permutations(range(len(texts)))), dtype=np.int64)
    mask = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts))))
    every, scores = index.search(q, len(texts), allowed=mask)
    order = np.lexsort((ties[every], -scores))[:k]
    for allowed in (mask, np.flatnonzero(mask)):
        positions, got = index.search(q, k, allowed=allowed, ties=ties)
        assert positions.tolist() == every[order].tolist()
        np.testing.assert_array_equal(got, scores[order])


@settings(max_examples=100, deadline=None)
@given(corpus, st.lists(query, max_size=6), st.integers(1, 10))
def test_batch_equals_single(texts: list[str], queries: list[str], k: int) -> None:
    index = BM25Index.build(texts)
    batch = index.search_batch(queries, k)
    assert len(batch) == len(queries)
    for q, (positions, scores) in zip(queries, batch, strict=True):
        single = index.search(q, k)
        np.testing.assert_array_equal(positions, single[0])
        np.testing.assert_array_equal(scores, single[1])


@settings(max_examples=150, deadline=None)
@given(corpus, query, st.data())
def test_allowed_subset_never_leaks(texts: list[str], q: str, data: st.DataObject) -> None:
    index = BM25Index.build(texts)
    allowed = data.draw(st.sets(st.integers(0, len(texts) - 1)))
    expected = reference_hits(texts, q, 10, 1.2, 0.75)
    positions, scores = index.search(q, 10, allowed=sorted(allowed))
    assert set(positions.tolist()) <= allowed
    assert_matches(positions, scores, expected, 10, allowed=allowed)
    mask = np.zeros(len(texts), dtype=bool)
    mask[sorted(allowed)] = True
    np.testing.assert_array_equal(index.search(q, 10, allowed=mask)[0], positions)


@settings(max_examples=150, deadline=None)
@given(corpus, query, st.data())
def test_seen_scores_as_the_reference_over_only_those_documents(
    texts: list[str], q: str, data: st.DataObject
) -> None:
    # What one asker sees is scored as if the index held nothing else (N, df, avgdl).
    index = BM25Index.build(texts)
    seen = sorted(data.draw(st.sets(st.integers(0, len(texts) - 1), min_size=1)))
    allowed = sorted(data.draw(st.sets(st.sampled_from(seen))))
    mask = np.zeros(len(texts), dtype=bool)
    mask[seen] = True
    alone = reference_hits([texts[i] for i in seen], q, 10, 1.2, 0.75)
    expected = [0.0] * len(texts)
    for i, score in zip(seen, alone, strict=True):
        expected[i] = score
    positions, scores = index.search(q, 10, allowed=allowed, seen=mask)
    assert_matches(positions, scores, expected, 10, allowed=set(allowed))
    np.testing.assert_allclose(
        index.scores_at(q, seen, seen=mask), [expected[i] for i in seen], rtol=REL
    )
    docs = [analyze_text(texts[i]) for i in seen]
    np.testing.assert_allclose(
        index.coverage(q, seen, seen=mask),
        ref.coverage(docs, analyze_text(q), list(range(len(seen)))),
        rtol=REL,
    )


@settings(max_examples=150, deadline=None)
@given(corpus, corpus, st.data(), query, k1s, bs)
def test_add_and_remove_equal_a_fresh_build(
    first: list[str], added: list[str], data: st.DataObject, q: str, k1: float, b: float
) -> None:
    index = BM25Index.build(first, k1=k1, b=b)
    new = index.add(added)
    assert new.tolist() == list(range(len(first), len(first) + len(added)))
    texts = first + added
    removed = data.draw(st.sets(st.integers(0, len(texts) - 1)))
    index.remove(sorted(removed))
    index.remove(sorted(removed))  # idempotent
    live = [i for i in range(len(texts)) if i not in removed]
    assert len(index) == index.doc_count == len(live)
    assert index.position_count == len(texts)
    assert index.live_mask().tolist() == [i not in removed for i in range(len(texts))]
    fresh = BM25Index.build([texts[i] for i in live], k1=k1, b=b)
    got = index.search(q, 50)
    want_pos, want_scores = fresh.search(q, 50)
    # Same statistics and same summation order: scores are bit-identical.
    np.testing.assert_array_equal(got[0], np.array(live, dtype=np.int64)[want_pos])
    np.testing.assert_array_equal(got[1], want_scores)


def _scores_by_search(index: BM25Index, q: str) -> np.ndarray:
    positions, scores = index.search(q, index.position_count)
    want = np.zeros(index.position_count, dtype=np.float32)
    want[positions] = scores
    return want


@settings(max_examples=150, deadline=None)
@given(st.one_of(corpus, sparse_corpus), st.data())
def test_scores_at_are_the_scores_search_returns(texts: list[str], data: st.DataObject) -> None:
    # What fusion reads for the vector leg's candidates: exactly the numbers a search gives
    # them (0 for no shared term or a removed document), after removals and additions.
    index = BM25Index.build(texts)
    index.remove(sorted(data.draw(st.sets(st.integers(0, len(texts) - 1)))))
    index.add(data.draw(st.lists(st.sampled_from(texts), max_size=5)))
    q = data.draw(st.one_of(query, st.lists(st.sampled_from(RARE), min_size=1).map(" ".join)))
    want = _scores_by_search(index, q)
    every = np.arange(index.position_count)
    got = index.scores_at(q, every)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    some = data.draw(st.lists(st.integers(0, index.position_count - 1), max_size=20))
    np.testing.assert_array_equal(index.scores_at(q, some), want[some])


@settings(max_examples=150, deadline=None)
@given(corpus, st.data(), query)
def test_coverage_equals_reference_after_removals(
    texts: list[str], data: st.DataObject, q: str
) -> None:
    index = BM25Index.build(texts)
    removed = data.draw(st.sets(st.integers(0, len(texts) - 1)))
    index.remove(sorted(removed))
    positions = data.draw(st.lists(st.integers(0, len(texts) - 1), max_size=30))
    docs = [None if i in removed else analyze_text(t) for i, t in enumerate(texts)]
    got = index.coverage(q, positions)
    assert got.dtype == np.float64 and got.shape == (len(positions),)
    want = ref.coverage(docs, analyze_text(q), positions)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert ((got >= 0) & (got <= 1 + 1e-12)).all()


def test_coverage_credits_an_exact_identifier_whatever_else_ranks() -> None:
    index = BM25Index.build(["login fails with ERR_TOKEN_EXPIRED", "login page redesign"] * 3)
    got = index.coverage("ERR_TOKEN_EXPIRED", [0, 1])
    assert got.tolist() == [1.0, 0.0]


@settings(max_examples=50, deadline=None)
@given(corpus, st.lists(query, min_size=1, max_size=4), k1s, bs, st.booleans())
def test_bytes_round_trip(texts: list[str], queries: list[str], k1, b, stem: bool) -> None:
    index = BM25Index.build(texts, k1=k1, b=b, stem=stem)
    index.remove([0])
    back = BM25Index.from_bytes(index.to_bytes())
    assert (back.k1, back.b, back.stem, back.stopwords) == (k1, b, stem, True)
    assert (len(back), back.position_count, back.vocab_size) == (
        len(index),
        index.position_count,
        index.vocab_size,
    )
    for (p1, s1), (p2, s2) in zip(
        index.search_batch(queries, 5), back.search_batch(queries, 5), strict=True
    ):
        np.testing.assert_array_equal(p1, p2)
        np.testing.assert_array_equal(s1, s2)


def test_duplicate_query_terms_count_each_time() -> None:
    index = BM25Index.build(["apple banana", "cherry", "apple apple"])
    _, once = index.search("apple", 3)
    _, twice = index.search("apple apple", 3)
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-6)


def test_ties_break_by_position_and_nonmatching_docs_are_not_returned() -> None:
    index = BM25Index.build(["x y", "z", "y x", "x y"])
    positions, _ = index.search("x", 10)
    assert positions.tolist() == [0, 2, 3]
    positions, scores = index.search("the of", 10)  # only stopwords
    assert positions.size == 0 and scores.size == 0
    assert BM25Index().search("x", 3)[0].size == 0


def test_analyser_is_shared_by_documents_and_queries() -> None:
    index = BM25Index.build(["The café was running", "nothing here"])
    assert index.search("CAFES RUN", 5)[0].tolist() == [0]
    plain = BM25Index.build(["The café was running"], stem=False, stopwords=False)
    assert plain.search("run", 5)[0].size == 0
    assert plain.search("the", 5)[0].tolist() == [0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda i: i.search("x", 0), r"^k: must be >= 1"),
        (lambda i: i.search("x", -3), r"^k: must be >= 1"),
        (lambda i: i.search("x", 2.5), r"^k: must be an int"),
        (lambda i: i.search_batch(["x"], 0), r"^k: must be >= 1"),
        (lambda i: i.search(["x"], 3), r"^query: must be a str"),
        (lambda i: i.search_batch("x", 3), r"^queries: must be a sequence"),
        (lambda i: i.search("x", 3, allowed=[5]), r"^allowed: position 5 is out of range"),
        (lambda i: i.search("x", 3, allowed=[-1]), r"^allowed: position -1 is out of range"),
        (lambda i: i.search("x", 3, allowed=[0.5]), r"^allowed: must be a 1-d sequence"),
        (lambda i: i.search("x", 3, allowed=np.ones(2, bool)), r"^allowed: a bool mask"),
        (lambda i: i.search_batch(["x"], 3, allowed=[9]), r"^allowed: position 9"),
        (lambda i: i.remove([3]), r"^positions: position 3 is out of range"),
        (lambda i: i.coverage("x", [3]), r"^positions: position 3 is out of range"),
        (lambda i: i.coverage(b"x", [0]), r"^query: must be a str"),
        (lambda i: i.scores_at("x", [3]), r"^positions: position 3 is out of range"),
        (lambda i: i.scores_at(b"x", [0]), r"^query: must be a str"),
        (lambda i: i.add("text"), r"^texts: must be a sequence of strings"),
        (lambda i: i.search("x", 3, seen=np.ones(2, bool)), r"^seen: a bool mask must have"),
        (lambda i: i.search("x", 3, ties=np.arange(2)), r"^ties: must hold one key per position"),
        (lambda i: i.coverage("x", [0], seen=[True] * 3), r"^seen: must be a bool mask"),
    ],
)
def test_bad_arguments_name_themselves(call, message: str) -> None:
    index = BM25Index.build(["x y", "y", "x"])
    with pytest.raises(ValueError, match=message):
        call(index)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k1": -0.1}, r"^k1: must be a finite number in \[0, 1000\]"),
        ({"k1": 1e308}, r"^k1: must be a finite number in \[0, 1000\]"),
        ({"k1": math.nan}, r"^k1: must not be NaN"),
        ({"k1": math.inf}, r"^k1: must be a finite number"),
        ({"b": 1.5}, r"^b: must be a finite number in \[0, 1\]"),
        ({"b": -0.5}, r"^b: must be a finite number in \[0, 1\]"),
        ({"b": math.nan}, r"^b: must not be NaN"),
        ({"k1": "1.2"}, r"^k1: must be a number"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BM25Index.build(["x"], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        BM25Index(**kwargs)  # type: ignore[arg-type]


def test_corrupt_bytes_are_a_clear_error() -> None:
    data = BM25Index.build(["apple banana", "cherry"]).to_bytes()
    flipped = bytearray(data)
    flipped[-3] ^= 0x40
    for bad in (b"", b"not an index at all, really", data[:-1], bytes(flipped), data + b"x"):
        with pytest.raises(ValueError, match=r"^data: corrupt or incompatible"):
            BM25Index.from_bytes(bad)
    with pytest.raises(ValueError, match=r"^data: must be bytes"):
        BM25Index.from_bytes("text")  # type: ignore[arg-type]
    assert len(BM25Index.from_bytes(memoryview(data))) == 2


def test_an_index_reopened_from_its_parts_answers_like_the_original_after_updates() -> None:
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(30)]

    def texts(n: int) -> list[str]:
        return [" ".join(rng.choice(words, size=int(rng.integers(1, 9)))) for _ in range(n)]

    owned = BM25Index.build(texts(60))
    owned.remove([3, 4, 50])
    parts = {name: array.copy() for name, array in owned.to_parts().items()}
    opened = BM25Index.open_parts(parts, owned.params())
    for step in range(4):  # the same edits on both: new rows, and removals old and new
        added = texts(7)
        assert owned.add(added).tolist() == opened.add(added).tolist()
        doomed = rng.choice(owned.position_count, size=5, replace=False)
        owned.remove(doomed)
        opened.remove(doomed)
        for query in ("w1 w2", "w7 w7 w3", "w29", f"w{step} w11 w12"):
            got, want = opened.search(query, 20), owned.search(query, 20)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
            live = np.flatnonzero(owned.live_mask())
            assert opened.coverage(query, live).tolist() == owned.coverage(query, live).tolist()
            assert opened.scores_at(query, live).tolist() == owned.scores_at(query, live).tolist()
            np.testing.assert_array_equal(
                opened.scores_at(query, live), _scores_by_search(owned, query)[live]
            )
    assert (len(opened), opened.vocab_size) == (len(owned), owned.vocab_size)
    again = BM25Index.open_parts(opened.to_parts(), opened.params())
    assert again.search("w1 w5", 10)[0].tolist() == owned.search("w1 w5", 10)[0].tolist()
    bad = {**parts, "offsets": parts["offsets"][:-1]}
    with pytest.raises(ValueError, match="offsets"):
        BM25Index.open_parts(bad, owned.params())


def test_a_word_broken_by_an_invisible_character_is_found_by_its_letters() -> None:
    # A soft hyphen (HTML's `&shy;`, hyphenated PDF text), a zero-width joiner or a word joiner
    # stays inside a UAX #29 word: "infor\u00admation" was a term of its own, and a search for
    # "information" never found the one document that held it.
    texts = [
        "The infor\u00admation sheet lists every rollout step.",
        "Deploys go out on Tuesdays.",
        "Rate\u2060limiting uses a token bucket per key.",
    ]
    index = BM25Index.build(texts)
    assert list(index.search("information", 3)[0]) == [0]
    assert list(index.search("ratelimiting", 3)[0]) == [2]
