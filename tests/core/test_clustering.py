"""Cosine clustering: Rust == reference, linkage guarantees, thresholds, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from octobrain.kernels.clustering import TIE_TOLERANCE, cosine_clusters
from tests.core import reference

# Rust works in float32 (GEMM + f32 normalisation), the reference in float64: their cosines
# differ by ~1e-6 at most here. Parity is asserted exactly on inputs where no decision (a
# linkage vs the cutoff, or the best merge vs the runner-up) is closer than this.
KNIFE_EDGE = 1e-4


def unit(rows: list[list[float]]) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float64)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def at_angles(degrees: list[float]) -> np.ndarray:
    r = np.radians(degrees)
    return np.stack([np.cos(r), np.sin(r), np.zeros_like(r)], axis=1).astype(np.float32)


def planted(seed: int, n_clusters: int, size: int, noise: int, d: int, spread: float) -> np.ndarray:
    """`n_clusters` groups of near-identical rows around random centres, plus noise rows."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, d))
    rows = [c + spread * rng.standard_normal((size, d)) for c in centres]
    rows.append(rng.standard_normal((noise, d)))
    x = np.concatenate(rows)
    return x[rng.permutation(len(x))]


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    u = x / np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    return u @ u.T


@st.composite
def cases(draw: st.DrawFn) -> tuple[np.ndarray, float, int, str]:
    x = planted(
        seed=draw(st.integers(0, 2**32 - 1)),
        n_clusters=draw(st.integers(0, 4)),
        size=draw(st.integers(2, 6)),
        noise=draw(st.integers(0, 10)),
        d=draw(st.integers(2, 24)),
        spread=draw(st.sampled_from([0.05, 0.2, 0.4, 0.7])),
    )
    assume(len(x) >= 2)
    threshold = draw(st.floats(0.0, 0.99))
    return x, threshold, draw(st.integers(2, 4)), draw(st.sampled_from(["complete", "average"]))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_matches_reference(case: tuple[np.ndarray, float, int, str]) -> None:
    x, threshold, min_size, linkage = case
    margins: list[float] = []
    want = reference.cosine_clusters(x, threshold, min_size, linkage, margins)
    assume(min(margins, default=1.0) > KNIFE_EDGE)
    assert cosine_clusters(x, threshold, min_size, linkage) == want


@settings(max_examples=100, deadline=None)
@given(cases())
def test_linkage_guarantee_and_shape(case: tuple[np.ndarray, float, int, str]) -> None:
    x, threshold, min_size, linkage = case
    clusters = cosine_clusters(x, threshold, min_size, linkage)
    sim = cosine_matrix(x)
    seen: set[int] = set()
    for c in clusters:
        assert c == sorted(c) and len(c) >= min_size
        assert seen.isdisjoint(c)
        seen.update(c)
        block = sim[np.ix_(c, c)]
        pairs = block[np.triu_indices(len(c), k=1)]
        if linkage == "complete":
            assert pairs.min() >= threshold - TIE_TOLERANCE - 1e-6
        else:
            assert pairs.mean() >= threshold - TIE_TOLERANCE - 1e-6
    keys = [(-len(c), c[0]) for c in clusters]
    assert keys == sorted(keys)


def test_chain_does_not_glue_ends_under_complete_linkage() -> None:
    # A~B (cos 25° = 0.906) and B~C (cos 30° = 0.866), but A≁C (cos 55° = 0.574).
    x = at_angles([0, 25, 55])
    assert cosine_clusters(x, 0.8, min_cluster_size=3) == []
    assert cosine_clusters(x, 0.8, min_cluster_size=2) == [[0, 1]]
    # A long chain at 10° steps with threshold cos 21°: groups never span more than 20°.
    degrees = [10.0 * k for k in range(15)]
    clusters = cosine_clusters(at_angles(degrees), float(np.cos(np.radians(21))), 2)
    assert clusters
    for c in clusters:
        assert max(degrees[i] for i in c) - min(degrees[i] for i in c) <= 20.0


def test_average_linkage_tolerates_one_weaker_pair() -> None:
    x = at_angles([0, 16, -16])  # pairs 0.961, 0.961, 0.848
    threshold = float(np.cos(np.radians(31)))  # 0.857
    assert cosine_clusters(x, threshold, 3, "average") == [[0, 1, 2]]
    assert cosine_clusters(x, threshold, 3, "complete") == []


def test_exact_threshold_counts_within_stated_tolerance() -> None:
    x = np.array([[2, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]], dtype=np.float32)  # cosine exactly 0.5
    assert cosine_clusters(x, 0.5, 2) == [[0, 1]]
    assert cosine_clusters(x, 0.5 + TIE_TOLERANCE / 2, 2) == [[0, 1]]
    assert cosine_clusters(x, 0.5 + 10 * TIE_TOLERANCE, 2) == []


def test_min_cluster_size_filters() -> None:
    x = at_angles([0, 1, 2, 90, 91, 180])
    assert cosine_clusters(x, 0.99, 2) == [[0, 1, 2], [3, 4]]
    assert cosine_clusters(x, 0.99, 3) == [[0, 1, 2]]
    assert cosine_clusters(x, 0.99, 4) == []


def test_recovers_planted_clusters_and_is_deterministic() -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((20, 64))
    x = np.concatenate([c + 0.05 * rng.standard_normal((5, 64)) for c in centres])
    x = np.concatenate([x, rng.standard_normal((300, 64))])  # noise beyond row 100
    got = cosine_clusters(x, 0.9, 3)
    assert sorted(got) == [list(range(5 * k, 5 * k + 5)) for k in range(20)]
    for linkage in ("complete", "average"):
        first = cosine_clusters(x, 0.3, 2, linkage)  # noisy, many merges
        assert all(cosine_clusters(x, 0.3, 2, linkage) == first for _ in range(3))


def test_duplicates_and_scale_do_not_matter() -> None:
    x = at_angles([0, 0, 0, 40, 40])
    scaled = x * np.array([[1], [3], [0.01], [7], [2]], dtype=np.float32)
    assert cosine_clusters(scaled, 0.95, 2) == [[0, 1, 2], [3, 4]]


def test_dtypes_are_converted() -> None:
    x64 = planted(1, 3, 4, 5, 16, 0.1)
    want = cosine_clusters(x64.astype(np.float32), 0.8, 3)
    assert cosine_clusters(x64, 0.8, 3) == want
    assert cosine_clusters(x64.tolist(), 0.8, 3) == want
    assert cosine_clusters(np.asfortranarray(x64), 0.8, 3) == want
    assert cosine_clusters(np.array([[1, 0], [2, 0], [3, 1]], dtype=np.int64), 0.9, 3) == [
        [0, 1, 2]
    ]
    assert cosine_clusters(np.zeros((0, 8), dtype=np.float32), 0.8, 2) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"vectors": np.array([["a", "b"]])}, "vectors"),
        ({"vectors": np.array([[1.0, None]], dtype=object)}, "vectors"),
        ({"vectors": np.ones(4)}, "vectors"),
        ({"vectors": np.ones((2, 2, 2))}, "vectors"),
        ({"vectors": np.array([[1.0, np.nan], [1.0, 0.0]])}, "vectors"),
        ({"vectors": np.array([[1.0, np.inf], [1.0, 0.0]])}, "vectors"),
        ({"vectors": np.array([[1e300, 1.0], [1.0, 0.0]])}, "vectors"),
        ({"vectors": np.ones((2, 0))}, "vectors"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"threshold": "0.5"}, "threshold"),
        ({"min_cluster_size": 1}, "min_cluster_size"),
        ({"min_cluster_size": -3}, "min_cluster_size"),
        ({"min_cluster_size": 2.5}, "min_cluster_size"),
        ({"linkage": "single"}, "linkage"),
    ],
)
def test_errors_name_the_argument(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"vectors": np.eye(3), "threshold": 0.5, "min_cluster_size": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{field}: "):
        cosine_clusters(**args)  # type: ignore[arg-type]


def test_zero_row_is_named() -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"^vectors: row 2 "):
        cosine_clusters(x, 0.5, 2)


def test_reference_agrees_on_the_hand_examples() -> None:
    # Guards the reference itself against drifting from the documented behaviour.
    x = at_angles([0, 25, 55])
    assert reference.cosine_clusters(x, 0.8, 2) == [[0, 1]]
    assert reference.cosine_clusters(x, 0.8, 3) == []
    assert reference.cosine_clusters(at_angles([0, 16, -16]), 0.857, 3, "average") == [[0, 1, 2]]
