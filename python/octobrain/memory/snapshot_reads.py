"""`memory get`, `recent` and `stats` in a process that has not opened LanceDB, answered from the
mirror when a current snapshot serves it (`corpus_snapshot.serve_current`), as `remember`'s
are: importing LanceDB to read one row or four columns was a third of such a process.

They answer as the store's reads do: the same rows (the snapshot is of the versions the
tables' newest manifests name), visible from the scope and global ones (archived ones too, but
to `recent`), each shown row checked against its checksum, an id prefix's candidates with the
titles the store lists (`schema.shown_title`), the newest in the same order (`newest_first`),
and the same rows counted (the caller orders the counts, ties by name, whichever read it made).
Where the mirror cannot tell what the store would say, None: the caller reads the store.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.memory import corpus_snapshot
from octobrain.memory.page_check import SnapshotDamaged
from octobrain.models import Memory, State
from octobrain.store import row_sums
from octobrain.store.schema import CHECKED, CHECKSUM, DAMAGED_TITLE, shown_title
from octobrain.store.sql import Sight

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus

_T = TypeVar("_T")
log = logging.getLogger(__name__)


def served(corpus: Corpus, read: Callable[[Corpus], _T | None]) -> _T | None:
    """`read` of the mirror, when its store has not opened LanceDB and a current snapshot
    serves it; None (the caller reads the store) otherwise, or when `read` says None. A
    snapshot whose rows fail their check is discarded (the next process rebuilds it)."""
    if corpus.store.connected or not corpus_snapshot.serve_current(corpus):
        return None
    return _undamaged(corpus, read)


def mirrored(corpus: Corpus, read: Callable[[Corpus], _T | None]) -> _T | None:
    """`read` of the mirror, where either serves it: `served` in a process that has not
    opened LanceDB, `warm` in one that holds the mirror; None: the caller reads the store."""
    found = served(corpus, read)
    return warm(corpus, read) if found is None else found


def warm(corpus: Corpus, read: Callable[[Corpus], _T | None]) -> _T | None:
    """`read` of a mirror this process holds already (the resident service's, an MCP
    server's), caught up with the store first, as a search is (`Corpus.refresh`): `memory
    recent`, `get` and `stats` through the service read LanceDB for rows it held (`recent`
    38 ms at 10,000 memories). Access counts are the store's: the service commits those kept
    by other processes before each call and its own in the background, each applied to the
    mirror once (`Corpus.note_own_access`, or the catch-up reading the rows committed).
    None in a new process, which has not opened LanceDB yet (a snapshot not current, which it
    may have adopted, is caught up with later: its one read is the store's), where no mirror
    is loaded, or when the snapshot it reads is found damaged (discarded)."""
    if not corpus.store.connected or corpus.version == -1:
        return None
    return _undamaged(corpus, read, catch_up=True)


def _undamaged(
    corpus: Corpus, read: Callable[[Corpus], _T | None], *, catch_up: bool = False
) -> _T | None:
    """`read` of the mirror (caught up first with `catch_up`), or None when the snapshot it
    reads is found damaged as it is read: discarded, never served (the next refresh or
    process rebuilds it), the caller reads the store."""
    try:
        if catch_up:
            corpus.refresh()
        return read(corpus)
    except SnapshotDamaged as exc:
        log.warning("memory snapshot damaged (%s); reading the store", exc)
        corpus.discard_snapshot()
        return None


def _visible(c: Corpus, positions: Sequence[int], sight: Sight) -> npt.NDArray[np.int64]:
    at = np.asarray(positions, dtype=np.int64)
    return at[c.in_sight(at, sight)]


def memory(c: Corpus, memory_id: str, sight: Sight) -> Memory | None:
    """The memory `memory_id` (a full id) `sight` sees as `MemoryStore.get` makes
    it (checked: `RowDamaged`), or None when there is none."""
    pos = c.pos_of.get(memory_id)
    if pos is None or not len(_visible(c, [pos], sight)):
        return None
    return copy.copy(c.memory(pos))  # (the mirror's own is cached)


def with_prefix(c: Corpus, prefix: str, sight: Sight, limit: int) -> list[tuple[str, str]] | None:
    """`MemoryStore.ids_with_prefix`: `(id, shown title)` of the memories `sight` sees
    whose id starts with `prefix`, sorted; None when more than `limit` do (which of
    them the store's read takes depends on the order it reads them in)."""
    at = _visible(c, c.pos_of.starting_with(prefix), sight)
    if len(at) > limit:
        return None
    rows = c.take(at, [*CHECKED, CHECKSUM]).to_pylist()
    return sorted((str(row["id"]), shown_title(row)) for row in rows)


def newest_first(rows: pa.Table, limit: int) -> pa.Array:
    """The indices in `rows` (`created_at` and `id` among their columns) of the `limit`
    newest, newest first, ties by id (the last first): `recent`'s order, whether the store or
    the mirror read them."""
    return pc.sort_indices(rows, [("created_at", "descending"), ("id", "descending")])[:limit]


def newest(c: Corpus, sight: Sight, memory_type: str | None, limit: int) -> list[Memory]:
    """`Brain.recent`: the `limit` newest memories `sight` sees, not archived (of
    `memory_type`, when given), in `newest_first`'s order. Only the rows that can be among
    them are taken and sorted (sorting every visible row's time and id was O(store))."""
    mask = c.seen_by(sight) & ~c.coded_in("state", [State.ARCHIVED.value])
    if memory_type is not None:
        mask &= c.coded_in("type", [memory_type])
    positions = np.flatnonzero(mask)
    if 0 < limit < len(positions):  # only rows at least as new as the `limit`-th newest
        created = c.created(positions)
        floor = np.partition(created, len(created) - limit)[len(created) - limit]
        positions = positions[created >= floor]  # (ties on it kept: the ids order them)
    order = newest_first(c.take(positions, ["created_at", "id"]), limit)
    listed = positions[order.to_numpy()].tolist()
    return [copy.copy(m) for m in c.memories_at(listed)]  # (the mirror's own are cached)


def counted(c: Corpus, sight: Sight, names: Sequence[str]) -> tuple[pa.Table, set[int], list[str]]:
    """`names` of every memory `sight` sees (archived included), in the mirror's
    order (not a scan's: a caller that needs an order makes its own), the positions among
    them of those that fail their check (`garbled`): every mirrored row checked where it lies,
    no checked column taken out (taking them cost `memory stats` 95 ms at 10,000 memories),
    and the ids of the edges that fail theirs (every one, as `MemoryStore.damaged_links`)."""
    at = np.flatnonzero(c.seen_by(sight))
    damaged = row_sums.memories_damaged(c.rows())[at]
    return c.take(at, list(names)), set(np.flatnonzero(damaged).tolist()), c.damaged_links()


def tallied(rows: pa.Table, key: str, garbled: set[int]) -> dict[str, int]:
    """How many of `rows` hold each value of `key` (as `str` gives it), the most first, ties
    by name; a row at a position in `garbled` counts as damaged, never by what it reads as.
    Counted in Arrow: a Python string per row and column took 34 ms at 50,000 memories (3.5)."""
    column = rows.column(key)
    counts: Counter[str] = Counter()
    if garbled:
        kept = np.ones(len(column), dtype=bool)
        kept[sorted(garbled)] = False
        column = column.filter(pa.array(kept))
        counts[DAMAGED_TITLE] = len(garbled)
    for found in pc.value_counts(column).to_pylist():
        counts[str(found["values"])] += found["counts"]
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def garbled(rows: pa.Table) -> set[int]:
    """The positions in `rows` (holding the `CHECKED` fields and the checksum) of the memories
    that no longer match their checksum, whether the store or the mirror read them: every row
    at once, in Rust (`row_sums`; a row as a Python object cost ~25 µs)."""
    return set(np.flatnonzero(row_sums.memories_damaged(rows)).tolist())
