"""Where the sleep pass's conflict check stands in a scope's recent rows, kept between passes
(`_octobrain/sleep/conflicts-<scope hash>.json`, beside the tables: a local file, or one object).

A pass compares at most `conflicts.PAIRS_PER_PASS` pairs, so on a burst of restatements it
checks only some of its recent rows. Without a record every pass would check the same newest
ones, and the older rows of the burst only from the pairs the newer ones keep. So the record
keeps the newest row a pass has seen, the key ranges below it no pass has reached (its gaps),
and where checking the rows reached again goes on. A pass checks, newest first within each
part: the rows written since the last pass, the gaps (on down from where the last pass
stopped), then, with budget left, the rows reached before, again, on from where that stopped
and round to the newest. The rows left in gaps are counted (`SleepReport.unchecked`). A row
stored after a pass with a time before the newest that pass saw (an import) would be taken
for one reached: so an import opens a gap over the times of its rows in the window
(`reopen`), and they are checked, and counted, with the other rows no pass has reached.

A row left in a gap stays in the check after it leaves the pass's window (`max_age_days`),
until a pass reaches it: at one pass a day a burst deeper than the window's passes would
otherwise leave its oldest rows never checked. A gap's lower end is the window's start when a
pass first saw its rows (`after`'s `floor`), so the rows older than that, never in a window,
never join; a gap with no lower end (a record written before gaps had one) is checked only
while its rows are in the window.

Rows are named by a key, (created_at in microseconds, id), so rows deleted, merged or aged out
of the window between passes need nothing: a key range simply holds fewer rows. A missing,
damaged or older record is a first pass: newest first. Two passes at once (the lazy pass holds
a lock, `sleep-consolidate` does not), or a pass and an import, may each write the record: the
later one keeps the gaps the other added (`save`), so what the other checked is at worst
checked again, never skipped: a record only ever marks as reached rows that its pass or an
earlier record did. A dry run reads the record, never writes it.

A `memory restore` takes the store's rows and edges back, not these records: the conflicts a
pass recorded since may be gone while its record says their rows were reached. So a restore
leaves a new mark (`sleep/conflicts-restored.json`), each record names the mark it was written
under, and a record under another mark is a first pass's: the check starts over from the newest.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from octobrain.store.sql import sql_str

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

FORMAT = 1
MAX_GAPS = 32  # each pass leaves at most one more; past this the two oldest become one

Key = tuple[int, str]
Gap = tuple[Key | None, Key]  # rows with low < key < high (low None: no lower end)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def key_of(row: Mapping[str, Any]) -> Key:
    """A recent row's place in the sweep: newer rows have larger keys, ties by id."""
    created: datetime = row["created_at"]
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (created - _EPOCH) // _MICROSECOND, str(row["id"])


@dataclass(frozen=True)
class Sweep:
    """The newest row a pass has seen; the key ranges below it no pass has reached yet (newest
    first, disjoint); and where the check of the rows reached goes on (below `resume`; None:
    from the newest)."""

    newest: Key | None = None
    gaps: tuple[Gap, ...] = ()
    resume: Key | None = None
    mark: str | None = field(default=None, compare=False)  # the restore it was read under

    def order(self, keys: Mapping[int, Key]) -> list[int]:
        """The rows (`keys`: position → key) in the order to check them, each part newest
        first: those newer than `newest`, those in a gap, then the rest, from below `resume`
        on round to it."""
        ranked = sorted(keys, key=keys.__getitem__, reverse=True)
        if self.newest is None:
            return ranked
        gap_of = _locator(self.gaps)
        new, unreached, below, above = [], [], [], []
        for at in ranked:
            key = keys[at]
            if key > self.newest:
                new.append(at)
            elif gap_of(key) is not None:
                unreached.append(at)
            elif self.resume is None or key < self.resume:
                below.append(at)
            else:
                above.append(at)
        return new + unreached + below + above

    def after(
        self,
        keys: Mapping[int, Key],
        order: Sequence[int],
        checked: int,
        floor: Key | None = None,
    ) -> tuple[Sweep, int]:
        """The sweep once the first `checked` rows of `order` are checked (a pass checks at
        least one), and how many of the rest no pass has reached. `floor` is the start of the
        pass's window (`floor_of`): the rows new to this pass left unreached are those above
        it, and their gap ends there."""
        if not order or not checked:
            return self, len(order)
        newest = max(keys.values())
        if self.newest is not None:
            newest = max(newest, self.newest)
        last = keys[order[checked - 1]]
        at = _locator(self.gaps)(last)
        resume = self.resume
        if self.newest is None or last > self.newest:  # within the rows new to this pass
            low = self.newest
            if floor is not None and (low is None or low < floor):
                low = floor  # rows below it were never in a window: not this gap's
            gaps = [(low, last), *self.gaps]
        elif at is not None:  # within a gap: the newer gaps are done
            gaps = [(self.gaps[at][0], last), *self.gaps[at + 1 :]]
        else:  # every row reached: checking them again, on from here next time
            gaps, resume = [], last
        left = [keys[i] for i in order[checked:]]
        gap_of = _locator(gaps)
        held = {gap_of(k) for k in left}
        gaps = [g for i, g in enumerate(gaps) if i in held]  # those still holding a row
        while len(gaps) > MAX_GAPS:
            low, _ = gaps.pop()
            gaps[-1] = (low, gaps[-1][1])
        gap_of = _locator(gaps)
        swept = Sweep(newest, tuple(gaps), resume, self.mark)
        return swept, sum(gap_of(k) is not None for k in left)

    def reopened(self, low: Key, high: Key) -> Sweep:
        """The sweep with the rows from `low` to `high` (keys of rows stored since the last
        pass, with older times) no pass has reached: a gap over them, joined with those it
        overlaps. A row in that range a pass did reach is checked again, none is skipped."""
        if self.newest is None:  # a first pass checks them in their turn
            return self
        opened = ((low[0], ""), min((high[0] + 1, ""), self.newest))  # (a row's id is not "")
        if not opened[0] < opened[1]:
            return self
        return replace(self, gaps=_union([*self.gaps, opened]))

    def joined(self, other: Sweep, base: Sweep) -> Sweep:
        """This sweep, made from `base`, with the gaps `other` (a record written from `base`
        meanwhile: an import's, another pass's) has and `base` had not: no row either leaves
        unreached is taken for reached (a row both passes checked may be checked again)."""
        if other.newest is None:
            return self
        if self.newest is None:
            return other
        added = [g for g in other.gaps if g not in set(base.gaps)]
        return replace(
            self, newest=max(self.newest, other.newest), gaps=_union([*self.gaps, *added])
        )

    def read_since(self, start: datetime) -> str:
        """The SQL condition on `created_at` of the rows a pass reads: those of its window
        (from `start`), and those of the gaps reaching below it (a gap with no lower end is
        not among them), which stay in the check until a pass reaches them."""
        floor = floor_of(start)
        window = f"created_at >= timestamp {sql_str(start.isoformat())}"
        ranges = [
            f"(created_at >= timestamp {sql_str(time_of(low).isoformat())}"
            f" AND created_at <= timestamp {sql_str(time_of(high).isoformat())})"
            for low, high in self.gaps
            if low is not None and low < floor
        ]
        return f"({' OR '.join([window, *ranges])})"

    def past(
        self, rows: Sequence[dict[str, Any]], start: datetime
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """`rows` (read by `read_since`) split into those of the window from `start`, and
        those before it in a gap."""
        floor, gap_of = floor_of(start), _locator(self.gaps)
        keyed = [(r, key_of(r)) for r in rows]
        return (
            [r for r, key in keyed if key > floor],
            [r for r, key in keyed if key < floor and gap_of(key) is not None],
        )

    def holds(self, key: Key) -> bool:
        """Whether `key` is in a gap: a row no pass has reached yet."""
        return _locator(self.gaps)(key) is not None

    def to_record(self, scope: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "scope": scope,
            "restored": self.mark,
            "newest": None if self.newest is None else list(self.newest),
            "gaps": [[None if low is None else list(low), list(high)] for low, high in self.gaps],
            "resume": None if self.resume is None else list(self.resume),
        }

    @classmethod
    def from_record(
        cls, record: Mapping[str, Any] | None, scope: str, restored: str | None = None
    ) -> Sweep:
        """The sweep a record holds; a first pass's (newest first) for a missing record, one of
        another format or scope or written before the store's last restore (`restored`, its
        mark), or one that does not hold what this one writes."""
        if not record or record.get("format") != FORMAT or record.get("scope") != scope:
            return cls()
        if record.get("restored") != restored:
            return cls()
        try:
            newest = _key(record["newest"])
            gaps = tuple(
                (None if low is None else _key(low), _key(high)) for low, high in record["gaps"]
            )
            resume = None if record["resume"] is None else _key(record["resume"])
        except (KeyError, TypeError, ValueError):
            return cls()
        sound = all((low is None or low < high) and high <= newest for low, high in gaps)
        # Newest first and disjoint; only the oldest may have no lower end.
        sound = sound and all(
            newer[0] is not None and older[1] <= newer[0] for newer, older in pairwise(gaps)
        )
        return cls(newest, gaps, resume) if sound else cls()


def floor_of(start: datetime) -> Key:
    """The key below every row written at or after `start` (a pass's window's start)."""
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return (start - _EPOCH) // _MICROSECOND, ""  # (a row's id is never empty)


def time_of(key: Key) -> datetime:
    """When a row of this key was written (to the microsecond)."""
    return _EPOCH + key[0] * _MICROSECOND


def _union(gaps: Sequence[Gap]) -> tuple[Gap, ...]:
    """Key ranges holding every key any of `gaps` does: newest first, disjoint, at most
    `MAX_GAPS` (the oldest joined)."""
    out: list[Gap] = []
    for low, high in sorted(gaps, key=lambda g: g[1], reverse=True):
        if out and (out[-1][0] is None or high > out[-1][0]):  # overlapping the one before
            newer = out[-1][0]
            out[-1] = (None if low is None or newer is None else min(low, newer), out[-1][1])
        else:
            out.append((low, high))
    while len(out) > MAX_GAPS:
        oldest, _ = out.pop()
        out[-1] = (oldest, out[-1][1])
    return tuple(out)


def _locator(gaps: Sequence[Gap]) -> Callable[[Key], int | None]:
    """A function giving the position in `gaps` (newest first, disjoint) of the one holding a
    key, or None."""
    highs = [high for _, high in reversed(gaps)]  # ascending

    def gap_of(key: Key) -> int | None:
        at = bisect_right(highs, key)  # the oldest gap ending above `key`
        if at == len(highs):
            return None
        index = len(gaps) - 1 - at
        low = gaps[index][0]
        return index if low is None or low < key else None

    return gap_of


def _key(value: Any) -> Key:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("not a key")
    micros, row_id = value
    if isinstance(micros, bool) or not isinstance(micros, int) or not isinstance(row_id, str):
        raise ValueError("not a key")
    return micros, row_id


RESTORED = "sleep/conflicts-restored.json"


def record_name(scope: str) -> str:
    return f"sleep/conflicts-{hashlib.sha256(scope.encode()).hexdigest()[:20]}.json"


def restored_mark(location: StoreLocation) -> str | None:
    """The mark of the store's last `memory restore` (None: never restored)."""
    mark = (location.read_json(RESTORED) or {}).get("mark")
    return mark if isinstance(mark, str) else None


def start_over(location: StoreLocation) -> None:
    """After a restore: every scope's sweep starts again from the newest rows (a new mark)."""
    location.write_json(RESTORED, {"mark": uuid.uuid4().hex})


def reopen(location: StoreLocation, scope: str, low: Key, high: Key, floor: Key) -> None:
    """After rows of `scope` were stored with times of their own (an import; `low` and `high`:
    the oldest and newest): those above `floor` (the window's start) that a pass would take
    for reached are not (`reopened`). Best effort, as `save`."""
    if high < floor:
        return
    before = load(location, scope)
    after = before.reopened(max(low, floor), high)
    if after != before:
        save(location, scope, after, before)


def load(location: StoreLocation, scope: str) -> Sweep:
    """The scope's sweep as the last pass left it; a first pass's when it cannot be read."""
    try:
        mark = restored_mark(location)
        record = location.read_json(record_name(scope))
        swept = Sweep.from_record(record, scope, mark) if record else Sweep()
        return replace(swept, mark=mark)
    except (OSError, ValueError, RecursionError):  # (a record nested past reading)
        return Sweep()
    except Exception as exc:  # (an object store's errors are classes of its own)
        log.warning("conflict check: where the last pass stopped could not be read (%s)", exc)
        return Sweep()


def save(location: StoreLocation, scope: str, sweep: Sweep, loaded: Sweep | None = None) -> None:
    """Keep the scope's sweep for the next pass; best effort (a store this process may not
    write, a full disk): the pass's conflicts are recorded already, and without the record
    the next pass checks the same rows again, skipping none. With `loaded` (the record the
    pass read), a record written since (an import's, another pass's) is `joined`. The record
    names the restore mark it was read under, so one a restore overtook is read as none."""
    try:
        if loaded is not None:
            now = load(location, scope)
            if now != loaded:
                sweep = sweep.joined(now, loaded)
        location.write_json(record_name(scope), sweep.to_record(scope))
    except Exception as exc:  # (an object store's errors are classes of its own)
        log.warning("conflict check: where this pass stopped was not kept (%s)", exc)


__all__ = ["Sweep", "floor_of", "key_of", "load", "reopen", "save", "start_over", "time_of"]
