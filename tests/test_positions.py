"""Row address → position stays exact while rows are appended, moved and removed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.memory.corpus_io import merged_ids, sorted_ids
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


# Ids: mostly of one length (uuids), some repeated, a few shorter or ending in a zero byte.
IDS = st.lists(
    st.one_of(
        st.text("ab\u00e9\x7f", min_size=4, max_size=4),
        st.sampled_from(["abab", "baba", "\u00e9ab", "ab", "ab\x00"]),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ids=IDS, data=st.data())
def test_ids_merged_in_are_sorted_as_a_sort_of_them_all(
    ids: list[str], data: st.DataObject
) -> None:
    """The ids added since the last sort, merged into it (`merged_ids`), give what sorting
    every live id again gives (the snapshot's `ids.npy` / `id_order.npy`, byte for byte), or
    None (the caller sorts them all)."""
    n = len(ids)
    start = data.draw(st.integers(0, n))
    then = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    gone = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    column = pa.chunked_array([pa.array(ids, pa.string())])
    held, order = sorted_ids(column.slice(0, start), then[:start])
    live = then & ~gone  # (removed since: rows are appended, never revived)
    merged = merged_ids(held, order, column.slice(start), live, start)
    whole = sorted_ids(column, live)
    if merged is not None:
        assert merged[0].dtype == whole[0].dtype
        assert merged[0].tobytes() == whole[0].tobytes()
        assert merged[1].tolist() == whole[1].tolist()
    elif all(len(m.encode()) == 4 for m in ids) and live[:start].any():
        raise AssertionError("ids of one length were sorted again, not merged")
