"""The mirror's two ways to a row's position: by memory id (`Positions`), and by Lance row
address (`AddressIndex`), for the ANN leg (LanceDB hands its candidates over as row addresses
without reading a column of them).

Lance never gives an address to a second row (fragment ids are never reused), so an address
read from any version names the same row or none. A row gets a new address when it is
rewritten (an access counted, an edit, compaction), so the index keeps one sorted array for
the bulk of the rows and a dict for those appended or moved since it was sorted: a write never
re-sorts a million addresses, and every answer is checked against the row's current address.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus

_MAX_SINCE = 4096  # rows appended or moved before the whole index is sorted again


class Positions:
    """id → position of the live rows: sorted ids for the bulk of them, a dict for the rows
    added since (no Python object per row)."""

    def __init__(self, corpus: Corpus) -> None:
        # A proxy, not a reference: a cycle kept a dropped mirror (and its snapshot's memory
        # maps) until the garbage collector's next pass (`Brain.close`).
        self._c: Corpus = weakref.proxy(corpus)
        # (the sorted part, the positions and ids added after it: what the keys were made of)
        self._ties: tuple[npt.NDArray[np.int64], int, int, npt.NDArray[np.int64]] | None = None

    def tie_keys(self) -> npt.NDArray[np.int64]:
        """Each position's rank in id order (positions without a live id last): equal scores
        in a ranking break by it, so mirrors holding the same rows at other positions (a
        snapshot with its tail replayed, a fresh build) rank them alike. Kept until a row
        is added or the ids are sorted again."""
        c = self._c
        held = self._ties
        if (
            held is not None
            and held[0] is c._id_order
            and held[1:3] == (len(c._live), len(c._added))
        ):
            return held[3]
        ranks = np.arange(len(c._sorted_ids), dtype=np.int64)
        keys = np.full(len(c._live), len(ranks) + len(c._added), dtype=np.int64)
        if c._added:  # merged in, not sorted with the rest: a few thousand among a million
            added = np.asarray([m.encode() for m in c._added])
            order = np.argsort(added, kind="stable")
            before = np.searchsorted(c._sorted_ids, added[order]) if len(ranks) else order * 0
            ranks += np.searchsorted(before, ranks, side="right")
            at = np.fromiter(c._added.values(), np.int64, len(added))[order]
            keys[at] = before + np.arange(len(added), dtype=np.int64)
        keys[np.asarray(c._id_order, dtype=np.int64)] = ranks
        self._ties = (c._id_order, len(c._live), len(c._added), keys)
        return keys

    def get(self, memory_id: str, default: int | None = None) -> int | None:
        c = self._c
        pos = c._added.get(memory_id)
        if pos is not None and c._live[pos]:
            return pos
        key = memory_id.encode()
        ids = c._sorted_ids
        if len(ids) and len(key) <= ids.dtype.itemsize:
            i = int(np.searchsorted(ids, key))
            if i < len(ids) and ids[i] == key:
                pos = int(c._id_order[i])
                if c._live[pos]:
                    return pos
        return default

    def many(self, memory_ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """`get` for many ids at once (-1 where there is no live row): one sorted search over
        the bulk of them instead of one per id."""
        c = self._c
        out = np.full(len(memory_ids), -1, dtype=np.int64)
        ids = c._sorted_ids
        if len(ids) and len(memory_ids):
            keys = [m.encode() for m in memory_ids]
            fits = np.fromiter((len(k) <= ids.dtype.itemsize for k in keys), bool, len(keys))
            wanted = np.asarray(keys, dtype=ids.dtype)  # (a longer key is cut: `fits` drops it)
            at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
            found = fits & (ids[at] == wanted)
            pos = np.asarray(c._id_order[at[found]], dtype=np.int64)
            out[found] = np.where(c._live[pos], pos, -1)
        if c._added:
            for i, memory_id in enumerate(memory_ids):
                added = c._added.get(memory_id)
                if added is not None and c._live[added]:
                    out[i] = added
        return out

    def starting_with(self, prefix: str) -> list[int]:
        """The live positions whose id starts with `prefix`, in id order."""
        c = self._c
        key, ids = prefix.encode(), c._sorted_ids
        found: dict[str, int] = {}
        if len(ids) and len(key) <= ids.dtype.itemsize:
            # Every id starting with `key` sorts between it and it followed by the largest byte.
            lo, hi = np.searchsorted(ids, [key, key + b"\xff" * (ids.dtype.itemsize - len(key))])
            for i in range(int(lo), int(hi)):
                found[ids[i].decode()] = int(c._id_order[i])
        found.update((m, p) for m, p in c._added.items() if m.startswith(prefix))
        return [found[m] for m in sorted(found) if c._live[found[m]]]

    def __getitem__(self, memory_id: str) -> int:
        pos = self.get(memory_id)
        if pos is None:
            raise KeyError(memory_id)
        return pos

    def __contains__(self, memory_id: object) -> bool:
        return isinstance(memory_id, str) and self.get(memory_id) is not None

    def values(self) -> list[int]:
        return [int(p) for p in np.flatnonzero(self._c._live)]

    def __iter__(self) -> Iterator[str]:
        ids = self._c.columns(["id"]).column("id")
        return iter(ids.take(pa.array(self.values(), pa.int64())).to_pylist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self._c._live))


class AddressIndex:
    """Positions by row address over a mirror's per-position `addr` and `live` arrays."""

    def __init__(self) -> None:
        self._sorted: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._since: dict[int, int] = {}

    def clear(self) -> None:
        """Forget everything: the next lookup sorts the mirror's addresses afresh."""
        self._sorted = None
        self._since.clear()

    def changed(self, positions: npt.NDArray[np.int64], addr: npt.NDArray[np.int64]) -> None:
        """The rows at `positions` were appended or got a new address (now in `addr`)."""
        if self._sorted is None:
            return
        if len(self._since) + len(positions) > _MAX_SINCE:
            self.clear()
            return
        self._since.update(zip(addr[positions].tolist(), positions.tolist(), strict=True))

    def positions(
        self,
        addrs: npt.NDArray[np.int64],
        addr: npt.NDArray[np.int64],
        live: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.int64]:
        """The live position of each of `addrs` (-1 where the mirror holds no such row)."""
        if self._sorted is None:
            if len(addr) < 2 or bool(np.all(addr[1:] > addr[:-1])):  # as rows are first read
                self._sorted = np.arange(len(addr), dtype=np.int64), addr.copy()
            else:
                order = np.argsort(addr, kind="stable")
                self._sorted = order, addr[order]
        order, known = self._sorted
        out = np.full(len(addrs), -1, dtype=np.int64)
        if len(known) and len(addrs):
            at = np.minimum(np.searchsorted(known, addrs), len(known) - 1)
            hit = known[at] == addrs
            out[hit] = order[at[hit]]
        if self._since:
            for i in np.flatnonzero(out < 0).tolist():
                out[i] = self._since.get(int(addrs[i]), -1)
        found = np.flatnonzero(out >= 0)
        pos = out[found]
        stale = (addr[pos] != addrs[found]) | ~live[pos]  # moved since, or removed
        out[found[stale]] = -1
        return out
