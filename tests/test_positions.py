"""Row address → position stays exact while rows are appended, moved and removed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.memory.positions import AddressIndex

# One step: append k rows, move some rows to new addresses, or remove some rows.
STEPS = st.lists(
    st.tuples(st.sampled_from(["append", "move", "remove"]), st.integers(1, 3000)),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 2000), steps=STEPS, seed=st.integers(0, 2**16))
def test_every_address_finds_its_live_row_and_no_other(
    first: int, steps: list[tuple[str, int]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    next_addr = 1 << 32
    addr = np.arange(next_addr, next_addr + first, dtype=np.int64)  # first read: in order
    next_addr += first + 5
    live = np.ones(first, dtype=bool)
    index = AddressIndex()
    retired: list[int] = []  # addresses that no longer name a live row
    index.positions(addr[:1], addr, live)  # the index is sorted once, then kept up to date
    for kind, k in steps:
        if kind == "append":
            new = np.arange(next_addr, next_addr + k, dtype=np.int64)
            next_addr += k
            start = len(addr)
            addr, live = np.concatenate([addr, new]), np.concatenate([live, np.ones(k, bool)])
            index.changed(np.arange(start, len(addr), dtype=np.int64), addr)
        elif len(addr):
            pos = np.unique(rng.integers(0, len(addr), min(k, len(addr)))).astype(np.int64)
            retired += addr[pos].tolist()
            if kind == "move":  # rewritten: a new, higher address at the same position
                addr[pos] = np.arange(next_addr, next_addr + len(pos), dtype=np.int64)
                next_addr += len(pos)
                index.changed(pos, addr)
            else:
                live[pos] = False
        asked = np.concatenate([addr, np.asarray(retired, np.int64), [next_addr + 1]])
        got = index.positions(asked, addr, live)
        want = {a: p for p, a in enumerate(addr.tolist()) if live[p]}
        assert got.tolist() == [want.get(a, -1) for a in asked.tolist()]
