"""Decay kernel: parity with the Python reference, behaviour, input handling and errors."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.kernels.decay import decayed_importance
from tests.core import reference

NOW = 1_700_000_000.0
DAY = 86_400.0

row = st.tuples(
    st.floats(0.0, 1.0),
    st.floats(-1e7, 1e9),  # seconds before NOW; negative = in the future
    st.integers(0, 2_000),
)


def decay_days(
    importance: list[float], days_ago: list[float], counts: list[int], **knobs: float
) -> list[float]:
    seen = np.array([NOW - d * DAY for d in days_ago])
    return decayed_importance(np.array(importance), seen, np.array(counts), NOW, **knobs).tolist()


@given(
    st.lists(row, max_size=40),
    st.floats(0.01, 1000.0),
    st.floats(0.0, 5.0),
    st.floats(0.0, 1.0),
)
def test_matches_reference(
    rows: list[tuple[float, float, int]], half_life: float, boost: float, floor: float
) -> None:
    importance = [r[0] for r in rows]
    seen = [NOW - r[1] for r in rows]
    counts = [r[2] for r in rows]
    ours = decayed_importance(
        np.array(importance), np.array(seen), np.array(counts), NOW, half_life, boost, floor
    )
    assert ours.dtype == np.float64
    expected = reference.decayed_importance(importance, seen, counts, NOW, half_life, boost, floor)
    # exp2 vs `0.5 **` and a different division order: a few ulps apart at most.
    for a, b in zip(ours.tolist(), expected, strict=True):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


@given(st.floats(0.0, 1.0), st.lists(st.floats(0.0, 5_000.0), min_size=2, max_size=20))
def test_monotone_in_age(importance: float, ages: list[float]) -> None:
    ages.sort()
    values = decay_days([importance] * len(ages), ages, [3] * len(ages), min_importance=0.0)
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_half_life_gives_exactly_half() -> None:
    values = decay_days([0.8, 0.8, 0.8], [30.0, 60.0, 0.0], [0, 0, 0], half_life_days=30.0)
    assert values == [0.4, 0.2, 0.8]


def test_floor_and_cap_bound_the_result() -> None:
    values = decay_days([0.5, 0.0, 0.9, 1.0], [10_000.0, 0.0, 0.0, 0.0], [0, 0, 5, 1_000])
    assert values == [0.05, 0.05, 1.0, 1.0]


def test_access_boost_raises_importance() -> None:
    counts = [0, 1, 2, 10, 300]
    values = decay_days([0.1] * 5, [5.0] * 5, counts)
    assert values == sorted(values)
    assert len(set(values)) == 5
    assert values[1] == pytest.approx(values[0] * (1 + 1.2 * math.log(2)))
    assert decay_days([0.1, 0.1], [5.0, 5.0], [0, 50], access_boost_factor=0.0) == [
        values[0],
        values[0],
    ]


def test_no_importance_stays_at_the_floor_whatever_the_boost() -> None:
    # 0 × an infinite boost was NaN, outside [floor, 1], and `clamp` let it through.
    assert decay_days([0.0, 0.5], [0.0, 0.0], [10, 10], access_boost_factor=1e308) == [0.05, 1.0]


def test_future_access_means_no_decay() -> None:
    assert decay_days([0.3, 0.3], [-20.0, 0.0], [0, 0]) == [0.3, 0.3]


def test_defaults_match_the_design() -> None:
    # importance 0.6, 90 days (one default half-life), 1 access: 0.6 * 0.5 * (1 + 1.2 ln 2)
    [value] = decay_days([0.6], [90.0], [1])
    assert value == pytest.approx(0.3 * (1 + 1.2 * math.log(2)), rel=1e-12)


def test_accepts_sequences_other_dtypes_and_datetimes() -> None:
    expected = decay_days([0.5, 0.25], [1.0, 2.0], [1, 0])
    now = datetime.fromtimestamp(NOW, tz=UTC)
    seen = [now - timedelta(days=1), now - timedelta(days=2)]
    assert decayed_importance([0.5, 0.25], seen, [1, 0], now).tolist() == pytest.approx(expected)
    stamps = np.array([NOW - DAY, NOW - 2 * DAY]).astype("datetime64[s]")
    ours = decayed_importance(
        np.array([0.5, 0.25], dtype=np.float32), stamps, np.array([1, 0], dtype=np.uint8), NOW
    )
    assert ours.tolist() == pytest.approx(expected)
    assert decayed_importance([], [], [], NOW).shape == (0,)


def test_disabled_returns_the_base_importance() -> None:
    out = decayed_importance(
        np.array([0.7, 0.01], dtype=np.float32), [0.0, 0.0], [0, 0], NOW, enabled=False
    )
    assert out.dtype == np.float64
    assert out.tolist() == pytest.approx([0.7, 0.01])


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"importance": ["high"]}, "importance"),
        ({"importance": [True]}, "importance"),
        ({"importance": [[0.5]]}, "importance"),
        ({"importance": [1.5]}, "importance"),
        ({"importance": [math.nan]}, "importance"),
        ({"last_accessed": ["yesterday"]}, "last_accessed"),
        ({"last_accessed": [math.inf]}, "last_accessed"),
        ({"last_accessed": np.array(["NaT"], dtype="datetime64[s]")}, "last_accessed"),
        ({"last_accessed": [datetime(2024, 1, 1)]}, "last_accessed"),
        ({"last_accessed": [0.0, 1.0]}, "last_accessed"),
        ({"access_count": [1.0]}, "access_count"),
        ({"access_count": [-1]}, "access_count"),
        ({"access_count": [1, 2]}, "access_count"),
        ({"now": datetime(2024, 1, 1)}, "now"),
        ({"now": "now"}, "now"),
        ({"now": math.nan}, "now"),
        ({"half_life_days": 0.0}, "half_life_days"),
        ({"half_life_days": math.inf}, "half_life_days"),
        ({"access_boost_factor": -0.1}, "access_boost_factor"),
        ({"min_importance": 1.1}, "min_importance"),
    ],
)
def test_errors_name_the_argument(kwargs: dict[str, object], argument: str) -> None:
    args: dict[str, object] = {
        "importance": [0.5],
        "last_accessed": [NOW],
        "access_count": [1],
        "now": NOW,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{argument}: "):
        decayed_importance(**args)  # type: ignore[arg-type]


def test_access_counts_at_the_integer_limits_neither_wrap_nor_misreport() -> None:
    # An unsigned count of 2**64 - 1 was cast to int64 as -1 and refused as "got -1".
    top = np.iinfo(np.int64).max
    for count in ([top], np.array([top], dtype=np.uint64)):
        assert decayed_importance([0.5], [NOW], count, NOW)[0] == 1.0  # full boost, capped
    for count in ([2**64 - 1], np.array([2**63], dtype=np.uint64)):
        with pytest.raises(InvalidInput, match=rf"^access_count: must be at most {top}, got "):
            decayed_importance([0.5], [NOW], count, NOW)


def test_wrong_dtype_is_invalid_input() -> None:
    with pytest.raises(InvalidInput) as info:
        decayed_importance([0.5], [NOW], np.array(["3"]), NOW)
    assert info.value.field == "access_count"
