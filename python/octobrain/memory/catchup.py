"""How the mirror (`Corpus`) finds what changed in `memories` between its version and a newer one.

Lance never changes a data file: a row that is added, updated or has its access counted is
written to a *new* fragment, whose id is above every fragment id before it (a restore keeps
the counter; compaction rewrites into new fragments too). So the rows changed since the
mirror's version are the rows whose address (`_rowaddr` = fragment id << 32 | offset) lies
above the highest fragment the mirror holds — a read of those fragments only, O(changes).
One whose `updated_at` or scope is not the mirror's is read again; one that only moved keeps
what the mirror holds. What that read cannot see is a row removed from an old fragment: the
store's change record (`octobrain.store.changes`) lists the ids each forget removed, and they
are checked against the table. The result is proved before it is used: the rows the mirror
would hold must be as many as the table holds at that version. When the record says anything
may have changed (a restore, a re-created table), when the count does not match, or the mirror
is empty, it reads the narrow columns of every row instead, as it always did (`full`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.memory.corpus_io import READ, int64s
from octobrain.store import addresses
from octobrain.store.pinned import Pinned

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus
    from octobrain.store.changes import Changes

log = logging.getLogger(__name__)

ADDR = addresses.ADDR  # Lance's row address of each row
# (`scope` too: a respelling pass (`store.respell`) rewrites a row's scope and nothing else)
PROBE = ["id", "updated_at", "scope", "last_accessed", "access_count", ADDR]
_PER_ID = 2048  # up to this many probed ids are looked up one by one (past it: one hash join)
# Up to this many rows in the changed fragments are read whole at once; more (compaction wrote
# every row anew) are probed by their narrow columns first, and only the changed ones read.
_WHOLE = 256


def above(mark: int) -> str:
    """The predicate of the rows in fragments above fragment `mark`."""
    return f"{ADDR} >= {(mark + 1) << 32}"


def fragment_mark(addrs: npt.NDArray[np.int64], mark: int = -1) -> int:
    """The highest fragment id among `addrs` (or `mark`, if higher)."""
    return max(mark, int(addrs.max()) >> 32) if len(addrs) else mark


@dataclass
class Delta:
    """What the mirror applies to reach a version (positions are the mirror's)."""

    gone: npt.NDArray[np.int64]  # positions to drop: deleted, or rewritten with new content
    read: list[str]  # ids whose rows are read again (new or changed content)
    moved: npt.NDArray[np.int64]  # positions whose row only moved (new address, same edit)
    moved_addr: npt.NDArray[np.int64]
    moved_access: npt.NDArray[np.int64]
    moved_seen: npt.NDArray[np.int64]
    mark: int  # the highest fragment id the mirror holds afterwards
    cheap: bool  # found from the changed fragments only
    rows: pa.Table | None = None  # the rows of `read`, when the catch-up has read them already


def _positions(corpus: Corpus, ids: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int64]:
    if len(ids) <= _PER_ID:
        return corpus.positions_of(ids.to_pylist())
    return corpus._lookup(ids)


def _diff(
    corpus: Corpus, probe: pa.Table, pos: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Of the probed rows: which the mirror holds, which changed, which only moved."""
    known = pos >= 0
    at = pos[known]
    addr = int64s(probe.column(ADDR))
    changed = ~known
    changed[known] = (corpus._edit_key[at] != int64s(probe.column("updated_at"))[known]) | (
        corpus._coded["scope"][at] != _scope_codes(corpus, probe.column("scope"))[known]
    )
    moved = known & ~changed  # then: a new address, or access counts the mirror lacks
    moved[known] &= (
        (corpus._addr[at] != addr[known])
        | (corpus._access[at] != int64s(probe.column("access_count"))[known])
        | (corpus._seen[at] != int64s(probe.column("last_accessed"))[known])
    )
    return known, changed, moved


def _scope_codes(corpus: Corpus, scopes: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int64]:
    """The mirror's code of each of `scopes` (-1: one it holds no row of), looked up once per
    distinct scope."""
    encoded = pa.chunked_array([scopes] if isinstance(scopes, pa.Array) else scopes)
    encoded = encoded.combine_chunks().dictionary_encode()
    codes = corpus._code_of["scope"]
    lookup = np.array([codes.get(s, -1) for s in encoded.dictionary.to_pylist()], np.int64)
    indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    return lookup[indices]


def _delta(
    corpus: Corpus, probe: pa.Table, pos: npt.NDArray[np.int64], gone: npt.NDArray[np.int64]
) -> tuple[Delta, npt.NDArray[np.bool_]]:
    known, changed, moved = _diff(corpus, probe, pos)
    ids = probe.column("id")
    read = ids.filter(pa.array(changed)).to_pylist() if changed.any() else []
    addrs = int64s(probe.column(ADDR))
    delta = Delta(
        gone=np.concatenate([gone, pos[known & changed]]).astype(np.int64),
        read=read,
        moved=pos[moved],
        moved_addr=addrs[moved],
        moved_access=int64s(probe.column("access_count"))[moved],
        moved_seen=int64s(probe.column("last_accessed"))[moved],
        mark=fragment_mark(addrs, corpus._mark),
        cheap=True,
    )
    return delta, known


def _sample(corpus: Corpus) -> list[tuple[int, str]]:
    """A few live rows (position, id): the first and last by id, and the last one added."""
    out = []
    ids, order = corpus._sorted_ids, corpus._id_order
    for i in {0, len(ids) - 1} if len(ids) else ():
        p = int(order[i])
        if corpus._live[p]:
            out.append((p, bytes(ids[i]).decode()))
    for mid, p in list(corpus._added.items())[-1:]:
        if corpus._live[p]:
            out.append((p, mid))
    return out


def cheap(corpus: Corpus, pinned: Pinned, removed: Changes) -> Delta | None:
    """The changes since the mirror's version from the fragments above its mark and the
    store's change record, proved by the row count; None when they cannot be proved."""
    if removed.everything:
        return None
    hinted = sorted(removed.ids)
    sample = _sample(corpus)
    addrs, count, left, placed = pinned.changes(
        above(corpus._mark), ids=hinted, addrs=[int(corpus._addr[p]) for p, _ in sample]
    )
    whole = len(addrs) <= _WHOLE
    probe = pinned.take(addrs, READ if whole else PROBE)
    if sorted(int64s(probe.column(ADDR)).tolist()) != sorted(addrs):
        log.info("memories: rows are not at the addresses just listed; reading all")
        return None
    pos = _positions(corpus, probe.column("id"))
    # Noted before its commit: a row still there was not removed (or came back, in `probe`).
    held = corpus.positions_of([i for i in hinted if i not in left])
    gone = held[held >= 0]
    delta, known = _delta(corpus, probe, pos, gone)
    expected = len(corpus) - len(gone) + int(np.count_nonzero(~known))
    if expected != count:
        log.info("memories: the changed fragments do not account for every row; reading all")
        return None
    # A row the changes leave in place must still be where the mirror has it (a table
    # re-created under the same name starts its fragment ids again).
    touched = {*delta.gone.tolist(), *delta.moved.tolist()}
    if any(placed.get(int(corpus._addr[p])) != mid for p, mid in sample if p not in touched):
        log.info("memories: a row is not where the mirror holds it; reading all")
        return None
    if whole:
        delta.rows = probe.filter(pa.array(np.isin(probe.column("id"), delta.read)))
    return delta


def full(corpus: Corpus, pinned: Pinned) -> Delta:
    """The changes since the mirror's version from the narrow columns of every row."""
    probe = pinned.scan_arrow("true", columns=PROBE)
    pos = corpus._lookup(probe.column("id"))
    present = np.zeros(len(corpus._live), dtype=bool)
    present[pos[pos >= 0]] = True
    gone = np.flatnonzero(corpus._live & ~present).astype(np.int64)
    delta, _ = _delta(corpus, probe, pos, gone)
    delta.mark, delta.cheap = fragment_mark(int64s(probe.column(ADDR))), False
    return delta
