"""Lance row address → mirror position, for the ANN leg (LanceDB hands its candidates over as
row addresses without reading a column of them).

Lance never gives an address to a second row (fragment ids are never reused), so an address
read from any version names the same row or none. A row gets a new address when it is
rewritten (an access counted, an edit, compaction), so the index keeps one sorted array for
the bulk of the rows and a dict for those appended or moved since it was sorted: a write never
re-sorts a million addresses, and every answer is checked against the row's current address.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_MAX_SINCE = 4096  # rows appended or moved before the whole index is sorted again


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
