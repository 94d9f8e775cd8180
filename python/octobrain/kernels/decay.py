"""Decayed importance: unused memories fade in the ranking, but are never deleted.

Computed at query time over whole columns in one call to the Rust core:

    days    = max(0, now - last_accessed) / 86400     (fractional; a future time counts as 0)
    decayed = importance * 0.5 ** (days / half_life_days)
                         * (1 + access_boost_factor * ln(1 + access_count))
    result  = clip(decayed, min_importance, 1.0)

The result is a bounded ranking signal on the same [0, 1] scale as the stored importance:
reinforcement can lift a memory up to 1.0 but not past it (upstream let five accesses triple an
importance), and the floor keeps a long-unused memory retrievable.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from octobrain import _core
from octobrain.errors import InvalidInput

if TYPE_CHECKING:
    from octobrain.config import MemoryConfig
    from octobrain.models import Memory

__all__ = ["decayed_importance"]


def decayed_importance(
    importance: npt.ArrayLike,
    last_accessed: npt.ArrayLike | Sequence[datetime],
    access_count: npt.ArrayLike,
    now: float | datetime,
    half_life_days: float = 90.0,
    access_boost_factor: float = 1.2,
    min_importance: float = 0.05,
    *,
    enabled: bool = True,
) -> npt.NDArray[np.float64]:
    """Decay every row's importance by time since last access, boosted by its access count.

    Args:
        importance: stored base importance per memory, in [0, 1] (any real or integer dtype).
        last_accessed: last access per memory, unix seconds (real or integer dtype) or
            ``datetime64`` values.
        access_count: number of accesses per memory, integers >= 0.
        now: the current time, unix seconds or a timezone-aware `datetime`.
        half_life_days: days without access after which importance halves (> 0).
        access_boost_factor: weight of ``ln(1 + access_count)`` (>= 0; 0 disables the boost).
        min_importance: floor of the result, in [0, 1].
        enabled: when False, return ``importance`` unchanged (as float64).

    Returns:
        A new float64 array, one value per row, in ``[min_importance, 1]`` when enabled.

    Raises:
        InvalidInput: an array has a non-numeric dtype or is not 1-D (names the argument).
        ValueError: lengths differ or a value breaks its rule (message names the argument).
    """
    base = _column(importance, "importance", "fiu", np.float64)
    if not enabled:
        return np.array(base, dtype=np.float64)
    seen = _timestamps(last_accessed)
    counts = _counts(access_count)
    return _core.decayed_importance(
        base,
        seen,
        counts,
        _unix_seconds(now),
        half_life_days,
        access_boost_factor,
        min_importance,
    )


def _column(values: Any, arg: str, kinds: str, dtype: type[np.generic]) -> npt.NDArray[Any]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidInput(arg, f"must be a 1-D array, got shape {array.shape}")
    # An empty Python list arrives as float64; that is fine for any column.
    if array.dtype.kind not in kinds and array.size:
        wanted = "integers" if kinds == "iu" else "real numbers"
        raise InvalidInput(arg, f"must hold {wanted}, got dtype {array.dtype}")
    return np.ascontiguousarray(array, dtype=dtype)


def _counts(values: Any) -> npt.NDArray[np.int64]:
    """Access counts as int64, the kernel's and the store's type: an unsigned count past its
    largest value is refused by name (cast, 2**64 - 1 wrapped to -1 and was refused as that)."""
    array = np.asarray(values)
    if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise InvalidInput(
            "access_count",
            f"must be at most {np.iinfo(np.int64).max}, got {int(array.max())}",
        )
    return _column(array, "access_count", "iu", np.int64)


def _timestamps(values: Any) -> npt.NDArray[np.float64]:
    array = np.asarray(values)
    if array.dtype.kind == "O" and array.size and isinstance(array.flat[0], datetime):
        stamps = [_unix_seconds(v, "last_accessed") for v in array.tolist()]
        array = np.array(stamps, dtype=np.float64)
    if array.dtype.kind == "M":
        if np.isnat(array).any():
            raise InvalidInput("last_accessed", "must not contain NaT")
        micros = array.astype("datetime64[us]").astype(np.int64)
        return micros.astype(np.float64) / 1e6
    return _column(array, "last_accessed", "fiu", np.float64)


def _unix_seconds(moment: Any, arg: str = "now") -> float:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise InvalidInput(arg, "a naive datetime is ambiguous; pass an aware one")
        return moment.timestamp()
    if isinstance(moment, (int, float, np.integer, np.floating)) and not isinstance(moment, bool):
        return float(moment)
    raise InvalidInput(arg, f"must be unix seconds or a datetime, got {type(moment).__name__}")


def memory_strength(
    memories: Sequence[Memory], now: datetime, config: MemoryConfig
) -> npt.NDArray[np.float64]:
    """Decayed importance of each memory now, with the `[memory]` decay settings."""
    return decayed_importance(
        [m.importance for m in memories],
        [m.last_accessed.timestamp() for m in memories],
        [m.access_count for m in memories],
        now,
        half_life_days=config.decay_half_life_days,
        access_boost_factor=config.access_boost_factor,
        min_importance=config.min_importance_threshold,
        enabled=config.decay_enabled,
    )
