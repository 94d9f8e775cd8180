"""Decayed importance: octobrain's Rust core vs the idiomatic numpy expression.

1M rows is a whole large store re-ranked at once; 100 rows is one query's candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from octobrain.kernels.decay import decayed_importance

NOW = 1_700_000_000.0
HALF_LIFE, BOOST, FLOOR = 90.0, 1.2, 0.05


def numpy_decay(
    importance: npt.NDArray[np.float64],
    last_accessed: npt.NDArray[np.float64],
    access_count: npt.NDArray[np.int64],
    now: float,
) -> npt.NDArray[np.float64]:
    days = np.maximum(now - last_accessed, 0.0) / 86_400.0
    boost = 1.0 + BOOST * np.log1p(access_count)
    return np.clip(importance * 0.5 ** (days / HALF_LIFE) * boost, FLOOR, 1.0)


@pytest.mark.parametrize("rows", [100, 1_000_000])
@pytest.mark.parametrize("impl", ["octobrain", "numpy"])
def test_decay(benchmark: Any, impl: str, rows: int) -> None:
    rng = np.random.default_rng(0)
    importance = rng.random(rows)
    last_accessed = NOW - rng.random(rows) * 365 * 86_400.0
    access_count = rng.geometric(0.3, rows).astype(np.int64) - 1
    args = (importance, last_accessed, access_count, NOW)
    fn = decayed_importance if impl == "octobrain" else numpy_decay
    benchmark.group = f"decay {rows:,} rows"
    benchmark.extra_info["impl"] = impl
    if rows >= 100_000:
        out = benchmark.pedantic(fn, args=args, rounds=30, iterations=1, warmup_rounds=2)
    else:
        out = benchmark(fn, *args)
    np.testing.assert_allclose(out, numpy_decay(*args), rtol=1e-12)
