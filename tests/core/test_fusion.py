"""Fusion kernels: parity with the Python reference, behaviour, and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.kernels.fusion import Fused, rrf, rrf_batch, score_fusion
from tests.core import reference

# Small id and weight alphabets make overlaps, repeats and exact score ties common, so the
# tie-breaking order is really exercised.
ids = st.lists(st.integers(-5, 30), max_size=25)
weight = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])
limits = st.one_of(st.none(), st.integers(1, 40))
raw_score = st.one_of(st.sampled_from([0.0, 1.0, 2.5, -1.0]), st.floats(-1e6, 1e6))


def same_ranking(ours: Fused, expected: tuple[list[int], list[float]]) -> None:
    assert ours.ids == expected[0]
    # Both sides add in the same order, so scores agree far below this tolerance.
    for a, b in zip(ours.scores, expected[1], strict=True):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


@st.composite
def weighted_lists(draw: st.DrawFn) -> tuple[list[list[int]], list[float] | None]:
    lists = draw(st.lists(ids, max_size=5))
    if not lists or draw(st.booleans()):
        return lists, None
    weights = draw(st.lists(weight, min_size=len(lists), max_size=len(lists)))
    if not any(weights):
        weights[0] = 1.0
    return lists, weights


@given(weighted_lists(), st.sampled_from([1.0, 2.0, 60.0, 0.5]), limits)
def test_rrf_matches_reference(
    case: tuple[list[list[int]], list[float] | None], k: float, limit: int | None
) -> None:
    lists, weights = case
    expected = reference.rrf(lists, weights, k, limit if limit is not None else 10**9)
    same_ranking(rrf(lists, weights, k=k, limit=limit), expected)


@given(weighted_lists(), st.sampled_from(["minmax", "zscore"]), limits, st.data())
@settings(max_examples=200)
def test_score_fusion_matches_reference(
    case: tuple[list[list[int]], list[float] | None],
    method: str,
    limit: int | None,
    data: st.DataObject,
) -> None:
    lists, weights = case
    scores = [data.draw(st.lists(raw_score, min_size=len(x), max_size=len(x))) for x in lists]
    expected = reference.score_fusion(
        lists, scores, weights, method, limit if limit is not None else 10**9
    )
    ours = score_fusion(lists, scores, weights, method=method, limit=limit)  # type: ignore[arg-type]
    same_ranking(ours, expected)


@given(st.lists(st.lists(ids, min_size=1, max_size=4), max_size=6), limits)
def test_batch_equals_single_calls(queries: list[list[list[int]]], limit: int | None) -> None:
    assert rrf_batch(queries, k=2.0, limit=limit) == [rrf(q, k=2.0, limit=limit) for q in queries]


def test_doc_in_both_lists_beats_doc_in_one() -> None:
    fused = rrf([[1, 2], [3, 2]])
    assert fused.ids[0] == 2
    assert fused.scores[0] == pytest.approx(2 / 62)
    assert fused.ids[1:] == [1, 3]  # equal score and rank: id ascending


def test_exact_ties_break_by_best_rank_then_id() -> None:
    # 9: 1/(1+1) = 0.5 from list 0; 4: 2/(1+3) = 0.5 from list 1 -> best rank 1 beats rank 3.
    fused = rrf([[9, 3], [1, 2, 4]], weights=[1.0, 2.0], k=1.0)
    assert fused.ids == [1, 2, 9, 4, 3]
    assert fused.scores[2] == fused.scores[3] == 0.5


def test_weights_too_large_to_sum_keep_their_proportions() -> None:
    # Two weights of 1e308 summed to inf, and every `w / total` was 0: all scores 0.
    lists, scores = [[1, 2, 3], [1, 2, 3]], [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]]
    huge = score_fusion(lists, scores, [1e308, 1e308])
    assert huge.scores == score_fusion(lists, scores, [1.0, 1.0]).scores == [1.0, 0.5, 0.0]


def test_weights_shift_the_order() -> None:
    lists = [[1, 2, 3], [3, 2, 1]]
    assert rrf(lists, weights=[2.0, 1.0]).ids == [1, 2, 3]
    assert rrf(lists, weights=[1.0, 2.0]).ids == [3, 2, 1]
    assert rrf(lists, weights=[1.0, 0.0]).ids == [1, 2, 3]


def test_smaller_k_favours_the_top_of_one_list() -> None:
    lists = [[1, 2, 3], [4, 3, 5]]
    assert rrf(lists, k=60.0).ids[0] == 3  # in both lists wins with a flat curve
    assert rrf(lists, k=0.1).ids[:2] == [1, 4]  # a steep curve rewards rank 1


def test_limit_and_empty_inputs() -> None:
    lists = [[5, 6, 7, 8], [8, 9]]
    assert rrf(lists, limit=2).ids == [8, 5]
    assert len(rrf(lists).ids) == 5
    assert rrf([]) == Fused([], [])
    assert rrf([[], []]) == Fused([], [])
    assert score_fusion([[], [1]], [[], [0.3]]).ids == [1]


def test_repeat_within_a_list_counts_once() -> None:
    fused = rrf([[1, 1, 2]])
    assert fused.ids == [1, 2]
    assert fused.scores == [1 / 61, 1 / 63]


def test_numpy_inputs_and_pairs() -> None:
    fused = rrf([np.array([3, 1], dtype=np.int32), [1]])
    assert fused.pairs() == [(1, 1 / 62 + 1 / 61), (3, 1 / 61)]
    ours = score_fusion([np.arange(3)], [np.array([0.2, 0.1, 0.0], dtype=np.float32)])
    assert ours.ids == [0, 1, 2]


def test_minmax_constant_list_and_missing_docs() -> None:
    fused = score_fusion([[1, 2], [2, 3]], [[0.9, 0.1], [4.0, 4.0]])
    # 1: 0.5*1 + 0 (missing) ; 2: 0.5*0 + 0.5*1 ; 3: 0 (missing) + 0.5*1 (constant list -> 1)
    assert fused.ids == [1, 2, 3]
    assert fused.scores == [0.5, 0.5, 0.5]


def test_minmax_keeps_score_gaps_that_rrf_drops() -> None:
    # 3 is nearly as good as the best in list 0 and clearly best in list 1; ranks hide that.
    lists = [[1, 2, 3, 4], [3, 1, 2]]
    scores = [[1.0, 0.99, 0.98, 0.0], [1.0, 0.01, 0.0]]
    assert rrf(lists).ids[0] == 1
    assert score_fusion(lists, scores).ids[0] == 3


def test_zscore_missing_doc_gets_list_minimum() -> None:
    fused = score_fusion([[1, 2, 3], [1]], [[3.0, 2.0, 1.0], [5.0]], method="zscore")
    z = math.sqrt(1.5)  # z-scores of (3, 2, 1) are (+z, 0, -z); list 1 is constant -> 0
    assert fused.ids == [1, 2, 3]
    assert fused.scores == pytest.approx([z / 2, 0.0, -z / 2])


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: rrf([[1]], k=0), "k"),
        (lambda: rrf([[1]], k=-1.0), "k"),
        (lambda: rrf([[1]], k=math.nan), "k"),
        (lambda: rrf([[1]], k=math.inf), "k"),
        (lambda: rrf([[1]], limit=0), "limit"),
        (lambda: rrf([[1]], limit=-3), "limit"),
        (lambda: rrf([[1], [2]], weights=[1.0]), "weights"),
        (lambda: rrf([[1]], weights=[-0.5]), "weights"),
        (lambda: rrf([[1]], weights=[math.nan]), "weights"),
        (lambda: rrf([[1], [2]], weights=[0.0, 0.0]), "weights"),
        (lambda: rrf([[1]], weights=["heavy"]), "weights"),  # type: ignore[list-item]
        (lambda: rrf([["a"]]), "lists"),  # type: ignore[list-item]
        (lambda: rrf([[1.5]]), "lists"),  # type: ignore[list-item]
        (lambda: rrf([[2**63]]), "lists"),
        (lambda: rrf([np.array([1.0])]), "lists"),
        (lambda: rrf([1, 2]), "lists"),  # type: ignore[list-item]
        (lambda: rrf_batch([[[1]], [["x"]]]), "queries"),  # type: ignore[list-item]
        (lambda: rrf_batch([[[1]], [[2], [3]]], weights=[1.0]), "weights"),
        (lambda: score_fusion([[1, 2]], [[0.5]]), "scores"),
        (lambda: score_fusion([[1], [2]], [[0.5]]), "scores"),
        (lambda: score_fusion([[1]], [[math.nan]]), "scores"),
        (lambda: score_fusion([[1]], [[math.inf]]), "scores"),
        (lambda: score_fusion([[1]], [[1e200]]), "scores"),
        (lambda: score_fusion([[1]], [np.array(["x"])]), "scores"),
        (lambda: score_fusion([[1]], [[0.5]], method="max"), "method"),  # type: ignore[arg-type]
        (lambda: score_fusion([[1]], [[0.5]], limit=0), "limit"),
        (lambda: score_fusion([[1]], [[0.5]], weights=[0.0]), "weights"),
    ],
)
def test_errors_name_the_argument(call: object, argument: str) -> None:
    with pytest.raises(ValueError, match=rf"^{argument}: "):
        call()  # type: ignore[operator]


def test_numpy_dtype_errors_are_invalid_input() -> None:
    with pytest.raises(InvalidInput) as info:
        rrf([np.array([0.5, 1.5])])
    assert info.value.field == "lists"
