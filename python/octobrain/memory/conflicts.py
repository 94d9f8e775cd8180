"""Conflicts: the same thing stated with two values, found by the sleep pass.

Two memories conflict when their embeddings are near-identical (true cosine ≥ the sleep
threshold) and they quote disjoint numbers: "the request timeout is 30 s" against "the request
timeout is 45 s". Cosine cannot tell the two apart, and often nobody recorded (`supersedes`)
which one holds, so a store that kept both answers a question with whichever wording happens to
match best, or with the one read most often while it was true.

The pass records what the store knows: a `conflicts` edge from the statement that prevails to
the one it outranks. The more trusted statement prevails (a user-confirmed value over an agent's
inference). Between equally trusted ones, the newer prevails over one stated before the pass's
window (`max_age_days`): a value that changed is restated with its new number, and the old one
stops being restated. Two equally trusted claims made within the window are a disagreement, not
an update (an agent's guess next to the fact it got wrong): the pass reports them and leaves
their order alone, for someone to settle with `supersedes`. A consolidation parent counts as
stated when its newest member was. Nothing is hidden or changed: when both are found, the
outranked memory ranks just below the other one and says why; each stays retrievable on its
own, and an explicit `supersedes` overrides it. Cosine and numbers cannot tell one setting's
two values from two things' settings worded alike ("the catalog service max upload size is
12 MB" / "the inventory service … 35 MB"), so the order steps aside when a question names what
only the outranked memory is about (`orderings.asks_for`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.kernels.clustering import unit_rows
from octobrain.models import Memory

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_BLOCK = 512  # recent rows compared per matrix product (bounds memory on a large scope)
# One fact restated with many values ("timeout 30 s", "31 s", …) conflicts pairwise: n of them
# would be n² pairs and edges, and every later query finding them would order them all. A row
# is paired with its PAIRS_PER_ROW nearest conflicting statements, and an outranked statement
# keeps the edges of its WINNERS_PER_LOSER most trusted, newest winners: the one that prevails
# over all still outranks every other.
PAIRS_PER_ROW = 128
WINNERS_PER_LOSER = 4
# The statements a row is checked against are its NEAR_PER_ROW nearest (ties by pool order):
# 8,192 copies of one note were 67 million pairs read one by one in Python (93 s). A row that
# quotes no number conflicts with nothing and is not compared at all.
NEAR_PER_ROW = 2 * PAIRS_PER_ROW
# Pairs compared per pass, over all its rows (`conflicting_pairs`): 21,500 restatements of one
# setting, each quoting another number, were 2.75 million pairs held at once (23 s, 1.39 GB).
PAIRS_PER_PASS = 512 * NEAR_PER_ROW
# Cosines this close are one (ties by pool order): a matrix product rounds a row's cosines by its
# place among the rows multiplied (numpy 2.4: a copy's 0.98787105 against 0.9878711), so a
# pass's rows, in blocks of its own order, would otherwise order copies by that rounding.
TIE = 1e-6


def numbers(text: str) -> frozenset[str]:
    """The numbers a text quotes ("1,200" and "3.5" stay whole)."""
    return frozenset(_NUMBER.findall(text))


def compatible(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two texts' numbers can describe the same fact: one quotes none, or they share
    one. Disjoint numbers in near-identical wording are two values of one thing."""
    return not a or not b or bool(a & b)


@dataclass(frozen=True)
class Statement:
    """What a reader sees for a row: the row itself, or the parent it was merged into."""

    id: str
    trust: float
    stated: datetime  # when its (newest) fact was written


@dataclass(frozen=True)
class Conflict:
    """`winner` prevails over `loser`, which states another value of the same thing."""

    winner: str
    loser: str
    reason: str  # "more trusted" | "newer"

    @property
    def description(self) -> str:
        return f"sleep pass: states another value; this one is {self.reason}"


def holds(winner: Memory, loser: Memory, *, winner_superseded: bool) -> bool:
    """Whether a `conflicts` edge winner → loser orders the two: not when the loser is the more
    trusted (an agent's link cannot outrank the user) or the winner is itself superseded.
    `remember` and the briefing both ask this."""
    return not winner_superseded and winner.source.trust >= loser.source.trust


def prevailing(
    a: Statement, b: Statement, window_start: datetime
) -> tuple[Statement, Statement, str] | None:
    """(winner, loser, reason) of two conflicting statements; None for a disagreement the
    store cannot settle: equally trusted, and both stated since `window_start`."""
    if a.trust != b.trust:
        hi, lo = (a, b) if a.trust > b.trust else (b, a)
        return hi, lo, "more trusted"
    new, old = (a, b) if a.stated > b.stated else (b, a)
    if old.stated < window_start:
        return new, old, "newer"
    return None


@dataclass(frozen=True)
class StatementPool:
    """The statements a sleep pass compares recent rows with, held as columns: on a large scope
    a dict and a list of Python floats per row would cost gigabytes."""

    ids: list[str]
    contents: list[str]
    vectors: npt.NDArray[np.float32]  # unit rows, one per id
    sources: list[str]
    created: list[datetime]
    roles: list[str] | None = None  # each statement's role; None: all of none

    def __len__(self) -> int:
        return len(self.ids)


def conflicting_pairs(
    recent: Sequence[Mapping[str, Any]],
    pool: StatementPool,
    threshold: float,
    budget: int | None = None,
    order: Sequence[int] | None = None,
) -> tuple[list[tuple[str, str]], int]:
    """(recent id, pool id) pairs of near-identical rows (cosine ≥ `threshold`) that quote
    disjoint numbers, at most `PAIRS_PER_ROW` per recent row (its nearest), found among its
    `NEAR_PER_ROW` nearest statements; and how many recent rows quoting a number were left
    unchecked. Recent rows carry `id`, `content`, `embedding` and, optionally, `created_at`
    and `role` (a row of a role is paired only with the pool's statements of its role or of
    none, those one reader sees together);
    a row in both is not paired with itself, and a pair within `recent` comes once (from the
    row first in `recent`, unless that row's list was cut or it was not checked). Only the
    pool rows near a checked row have their numbers read.

    A pass compares at most `budget` (`PAIRS_PER_PASS`) pairs: rows are checked in `order`
    (positions in `recent`; by default newest first, by `created_at`, then position) until
    the next row's statements would pass it (the first row always is), so what a pass costs
    does not grow with a flood of restatements. The sleep pass orders them by where the last
    pass stopped (`memory.sweep`), so successive passes cover every recent row. The pairs of a
    row left out with a row checked are found from that row's side. Within the rows checked
    the pairs, and their order, are those of checking every row, whatever the `order`."""
    budget = PAIRS_PER_PASS if budget is None else budget
    if not recent or not len(pool):
        return [], 0
    row_numbers = [numbers(r["content"]) for r in recent]
    quoting = [at for at, found in enumerate(row_numbers) if found]
    if not quoting:
        return [], 0
    if order is not None:
        newest = [at for at in order if row_numbers[at]]
    else:  # newest first; a row without a time counts by its position
        newest = sorted(
            quoting,
            key=lambda at: (
                recent[at].get("created_at") is not None,
                recent[at].get("created_at") or 0,
                at,
            ),
            reverse=True,
        )
    in_pool = {pid: k for k, pid in enumerate(pool.ids)}
    roles = np.asarray(pool.roles, dtype=object) if pool.roles and any(pool.roles) else None
    pool_numbers: dict[int, frozenset[str]] = {}
    # Per row checked: its list was cut to NEAR_PER_ROW, and its conflicting statements.
    checked: dict[int, tuple[bool, list[tuple[float, int]]]] = {}
    compared = 0
    for start in range(0, len(newest), _BLOCK):
        block = newest[start : start + _BLOCK]
        sims = _unit([recent[at] for at in block]) @ pool.vectors.T
        for at, row_sims in zip(block, sims, strict=True):
            near = np.flatnonzero(row_sims >= threshold)  # ascending: pool order
            near = near[near != in_pool.get(recent[at]["id"], -1)]  # not itself
            if roles is not None and recent[at].get("role"):
                # Only statements one reader sees beside it: of its role or of none. Weighed
                # against another role's, it lost to words no reader of its role can read.
                seen = roles[near]
                near = near[(seen == recent[at]["role"]) | (seen == "")]
            cut = len(near) > NEAR_PER_ROW
            if cut:
                near = _nearest(near, row_sims[near], NEAR_PER_ROW)
            if checked and compared + len(near) > budget:
                return _pairs(recent, pool, checked), len(quoting) - len(checked)
            compared += len(near)
            found: list[tuple[float, int]] = []
            for k in near.tolist():
                if k not in pool_numbers:
                    pool_numbers[k] = numbers(pool.contents[k])
                if pool_numbers[k] and not row_numbers[at] & pool_numbers[k]:
                    found.append((-float(row_sims[k]), k))
            checked[at] = (cut, found)
    return _pairs(recent, pool, checked), 0


def _nearest(
    near: npt.NDArray[np.intp], sims: npt.NDArray[np.float32], most: int
) -> npt.NDArray[np.intp]:
    """The `most` of `near` (ascending positions) with the highest `sims`, ties by position:
    a partition, not a sort of every statement above the threshold."""
    kth = np.partition(sims, len(sims) - most)[len(sims) - most]  # the most-th highest
    above = near[sims > kth + TIE]
    tied = near[np.abs(sims - kth) <= TIE][: most - len(above)]
    return np.sort(np.concatenate([above, tied]))


def _nearest_first(found: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """`found` (negated cosine, pool position) nearest first, ties by position: a cosine within
    `TIE` of the one before it ties with it."""
    out: list[tuple[float, int]] = []
    tied: list[tuple[float, int]] = []
    for pair in sorted(found):
        if tied and pair[0] - tied[-1][0] > TIE:
            out += sorted(tied, key=lambda p: p[1])
            tied = []
        tied.append(pair)
    return out + sorted(tied, key=lambda p: p[1])


def _pairs(
    recent: Sequence[Mapping[str, Any]],
    pool: StatementPool,
    checked: Mapping[int, tuple[bool, list[tuple[float, int]]]],
) -> list[tuple[str, str]]:
    """The pairs of the rows checked, in `recent` order, each row's nearest first (ties by
    pool order). A pair within `recent` comes from the row first in `recent`; from the other
    too when that row's list was cut or it was not checked (the pair may not be on it)."""
    order = {r["id"]: i for i, r in enumerate(recent)}
    out: list[tuple[str, str]] = []
    for at in sorted(checked):
        kept = []
        for pair in checked[at][1]:
            seen_from = order.get(pool.ids[pair[1]], len(recent))
            if seen_from < at and seen_from in checked and not checked[seen_from][0]:
                continue  # a recent pair already seen from the other side
            kept.append(pair)
        out += [(recent[at]["id"], pool.ids[k]) for _, k in _nearest_first(kept)[:PAIRS_PER_ROW]]
    return out


def resolve(
    pairs: Iterable[tuple[str, str]],
    statement_of: Mapping[str, Statement],
    settled: set[frozenset[str]],
    window_start: datetime,
) -> tuple[list[Conflict], list[tuple[str, str]]]:
    """One decision per pair of statements: the conflicts settled (winner over loser; for each
    loser its `WINNERS_PER_LOSER` most trusted, newest winners), and the disagreements left
    open (`prevailing` is None; each statement in at most as many). Skips a pair merged into
    one parent and one already linked (`settled`: a `conflicts` or `supersedes` edge either
    way)."""
    decided: dict[frozenset[str], Conflict] = {}
    open_: dict[frozenset[str], tuple[str, str]] = {}
    rank: dict[str, tuple[float, datetime]] = {}
    for a_id, b_id in pairs:
        a, b = statement_of[a_id], statement_of[b_id]
        key = frozenset((a.id, b.id))
        if a.id == b.id or key in settled or key in decided or key in open_:
            continue
        verdict = prevailing(a, b, window_start)
        if verdict is None:
            open_[key] = (min(a.id, b.id), max(a.id, b.id))
        else:
            winner, loser, reason = verdict
            decided[key] = Conflict(winner.id, loser.id, reason)
            rank[winner.id] = (winner.trust, winner.stated)
    by_loser: dict[str, list[Conflict]] = {}
    for conflict in decided.values():
        by_loser.setdefault(conflict.loser, []).append(conflict)
    kept = [
        c
        for found in by_loser.values()
        for c in sorted(found, key=lambda c: (rank[c.winner], c.winner), reverse=True)[
            :WINNERS_PER_LOSER
        ]
    ]
    listed: dict[str, int] = {}
    disagreements: list[tuple[str, str]] = []
    for one, two in sorted(open_.values()):  # each statement in at most WINNERS_PER_LOSER
        if max(listed.get(one, 0), listed.get(two, 0)) < WINNERS_PER_LOSER:
            disagreements.append((one, two))
            listed[one], listed[two] = listed.get(one, 0) + 1, listed.get(two, 0) + 1
    return sorted(kept, key=lambda c: (c.winner, c.loser)), disagreements


def _unit(rows: Sequence[Mapping[str, Any]]) -> npt.NDArray[np.float32]:
    return unit_rows(np.stack([np.asarray(r["embedding"], dtype=np.float32) for r in rows]))


__all__ = [
    "PAIRS_PER_PASS",
    "TIE",
    "Conflict",
    "Statement",
    "StatementPool",
    "compatible",
    "conflicting_pairs",
    "holds",
    "numbers",
    "prevailing",
    "resolve",
]
