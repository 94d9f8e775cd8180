"""The newest version of each table committed to a store, as octobrain recorded it.

On a local disk Lance leaves `_versions/latest_version_hint.json` after each commit, so a lost
newest version manifest shows (`versions.lost_version`). On `s3://` (and the other object
stores) it writes no hint: a deleted newest manifest left the version before it served, and the
next write buried the loss. So every write under the write lock records the versions it
committed in one record per store, `_octobrain/versions.json` (`{"memories": 12, ...,
"recorded_at": {"memories": <epoch seconds>, ...}}`): a table whose recorded version is above
the newest that opens, and was recorded after that one was committed, has lost versions. A
local store keeps it too, for when the hint went with the manifest (a partial backup or sync,
`rm` of both): read only then, so an open whose hint is there costs nothing more; written after
each hold of the write lock that committed (a small file replaced whole, under its own lock
`.versions.lock`, not synced: a mark lost in a crash stays lower, which is safe).

One object for the whole store, so opening it costs one GET whatever the number of tables (kept
for `storage.remote_refresh_ms`, as the other bucket reads are). The two write leases ("write",
"knowledge") both update it, each by compare-and-swap on the ETag it last saw, so neither undoes
the other's entry. The mark is written after the commit it records, and only from a table
handle's own version (which moves only on a commit the bucket acknowledged): a crash in between,
or a lost answer, leaves it below the newest version, which is never taken for damage; a holder
whose lease may be lost puts nothing (the new holder may have made the table again). A table
made again counts from 1: `doctor --recreate` drops its entry first, a table made sets it, and
`migrate` sets those it copied. `restore` and `reembed` are new, higher versions in Lance.

A recorded version above the newest that opens is a loss only if the entry was recorded after
that newest version was committed (a lost commit came after it, and its record after that). A
table started over after its entry was last set (`doctor --recreate` by a release that keeps no
record) has only versions committed after it: the entry is stale, the table is served, and the
next write under the lease sets it right. So each entry keeps when it was set (`recorded_at`, the
writer's wall clock, beside the versions), compared with Lance's timestamp of the newest version
that opens (its committer's clock). Two machines' clocks may disagree: the entry is taken for
stale only when that version came more than the clock tolerance (`CLOCK_TOLERANCE_S`, 5 min,
the one the write lease already assumes) after it. So a loss is named whatever the clocks, as
long as they agree within 5 min; a table started over within 5 min of its entry's last record
is still refused (the repair line's reset then clears it).

`s3+ddb://` needs none: its DynamoDB commit table already names the version, and a lost
manifest fails the open there.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from octobrain.errors import StorageError
from octobrain.files import read_regular, replace_whole
from octobrain.store import deletion_sums, sighted
from octobrain.store.endpoint import object_store_reason

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

MARKS = "versions.json"  # under the store's `_octobrain/`
RECORDED_AT = "recorded_at"  # the record's key for when each entry was set (no table's name)
_clock = time.time  # when an entry is set: this machine's wall clock (tests move it)
_CAS_TRIES = 8  # compare-and-swap attempts before giving up (the mark then stays lower: safe)
_LOCAL_LOCK_S = 10.0  # the local record's lock is held for a read and a write: not long
_MARK_BYTES = 1 << 20  # a record is a few hundred bytes; more is not one of ours


class HighWater:
    """The recorded newest versions of one store's tables (see the module docstring).
    Everything is a no-op on `s3+ddb://`."""

    def __init__(self, location: StoreLocation) -> None:
        self._location = location
        scheme = urlsplit(location.uri).scheme.lower()
        self.applies = not location.remote or scheme != "s3+ddb"
        self.key = f"_octobrain/{MARKS}"
        self._guard = threading.Lock()
        self._marks: dict[str, int] | None = None  # as last read or written (None: no object)
        self._at: dict[str, float] = {}  # when each entry was set (`time.time()` of its writer)
        self._etag: str | None = None
        self._read_at: float | None = None  # `time.monotonic` of the last read or write

    @property
    def location(self) -> StoreLocation:
        """The store whose versions these are."""
        return self._location

    def where(self) -> str:
        """The mark object's full address, for messages."""
        return f"{str(self._location).rstrip('/')}/{self.key}"

    def recorded(self, name: str, *, fresh: bool = False) -> int | None:
        """The version recorded for table `name` (None: none, or not kept here). Read from the
        bucket at most once per `storage.remote_refresh_ms`, unless `fresh` (from a local disk
        every time)."""
        if not self.applies:
            return None
        with self._guard:
            age = None if self._read_at is None else time.monotonic() - self._read_at
            if fresh or age is None or age > self._location.refresh_s:
                try:
                    self._read()
                except Exception as exc:  # unreachable: the tables' own reads report that
                    log.warning("could not read %s: %s", self.key, exc)
                    return None
            return (self._marks or {}).get(name)

    def recorded_at(self, name: str) -> float | None:
        """When the entry of table `name` was set (seconds since the epoch, on its writer's
        clock), as last read: None when not known (an entry from before entries kept it)."""
        with self._guard:
            return self._at.get(name)

    def last_known(self, name: str) -> int | None:
        """The version for table `name` as this process last read or wrote it, without asking
        the bucket (None: none, or not kept here)."""
        if not self.applies:
            return None
        with self._guard:
            return (self._marks or {}).get(name)

    def note(self, written: dict[str, int], *tables: lancedb.table.Table) -> None:
        """Note in `written` the version each of `tables` reached with the commit it just made
        (read at once: right after its own commit a handle knows its version without asking
        the bucket, a LIST request later). Nothing where no mark is kept."""
        if not self.applies:
            return
        for table in tables:
            try:
                version = int(table.version)
            except Exception as exc:  # never fail a commit that landed: the mark stays lower
                log.warning("could not read the version %s committed: %s", table.name, exc)
                continue
            written[table.name] = max(version, written.get(table.name, 0))

    def record(self, versions: Mapping[str, int | None]) -> None:
        """Record the versions just committed (None: forget a table's entry, before it is
        dropped). Call under the write lease, after the commit; nothing is put once the lease
        may be lost (`StoreLocation.check_held`). Never raises: a mark not written stays lower,
        which is safe."""
        if not self.applies or not versions:
            return
        with self._guard:
            try:
                self._record(versions)
            except StorageError as exc:  # `LeaseLost`: its new holder may have made the table
                # again, from version 1 (`location` imports this module: named by its base)
                log.warning("did not record the committed versions in %s: %s", self.key, exc)
                return  # (nor kept in memory: it would stand above the table made again)
            except Exception as exc:  # (an object store's errors end in a Rust dump: its gist)
                reason = object_store_reason(exc)
                log.warning("could not record the committed versions in %s: %s", self.key, reason)
        for name, version in versions.items():  # (kept whatever became of the record)
            sighted.sight(self._location, name, version)

    def _merged(
        self, versions: Mapping[str, int | None]
    ) -> tuple[dict[str, int], dict[str, float]]:
        """The record as last read, with `versions` set in it (None: an entry dropped)."""
        marks, at = dict(self._marks or {}), dict(self._at)
        for name, version in versions.items():
            if version is None:
                marks.pop(name, None)
                at.pop(name, None)
            else:
                # Set again even at the same number: a table started over may reach the
                # number of a stale entry, whose old time would pass its loss for staleness.
                marks[name], at[name] = int(version), _clock()
        return marks, at

    def _record(self, versions: Mapping[str, int | None]) -> None:
        if self._location.path is not None:
            self._record_locally(versions)
            return
        import obstore
        from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError

        if self._read_at is None:
            self._read()
        for _ in range(_CAS_TRIES):
            marks, at = self._merged(versions)
            if self._marks is not None and marks == self._marks and at == self._at:
                return
            # Only while the lease holds: a holder paused past it would put its versions over
            # those of a table its new holder made again (`doctor --recreate`), far above them.
            self._location.check_held()
            mode: Any = "create" if self._etag is None else {"e_tag": self._etag}
            data = json.dumps({**marks, RECORDED_AT: at}, sort_keys=True).encode()
            try:
                put = obstore.put(self._location.objects(), self.key, data, mode=mode)
            except (AlreadyExistsError, PreconditionError, NotFoundError, FileNotFoundError):
                self._read()  # another writer's update (or a reset) came between: merge again
                continue
            self._marks, self._at, self._etag = marks, at, put["e_tag"]
            self._read_at = time.monotonic()
            return
        log.warning("gave up recording the committed versions in %s (contended)", self.key)

    def _record_locally(self, versions: Mapping[str, int | None]) -> None:
        """`_record` on a local disk: read, merged and replaced whole under `.versions.lock`
        (the two write locks' holders both update it)."""
        from filelock import FileLock

        assert self._location.path is not None
        target = self._location.path / self.key
        with FileLock(str(self._location.path / ".versions.lock"), timeout=_LOCAL_LOCK_S):
            self._read()
            marks, at = self._merged(versions)
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_whole(target, json.dumps({**marks, RECORDED_AT: at}, sort_keys=True).encode())
            self._marks, self._at = marks, at
            self._read_at = time.monotonic()

    def _read(self) -> None:
        if self._location.path is not None:
            try:  # (a FIFO in its place raises, not waits for a writer)
                raw = read_regular(self._location.path / self.key, _MARK_BYTES)[0]
            except FileNotFoundError:
                self._marks, self._at = None, {}
            else:
                self._marks, self._at = _parse(raw)
            self._read_at = time.monotonic()
            return
        import obstore

        try:
            got = obstore.get(self._location.objects(), self.key)
            raw = bytes(got.bytes())
            etag = str(got.meta["e_tag"])
        except FileNotFoundError:
            self._marks, self._at, self._etag = None, {}, None
        else:
            self._marks, self._at = _parse(raw)
            self._etag = etag
        self._read_at = time.monotonic()


def damaged_record(location: StoreLocation) -> str | None:
    """Why the local store's record of committed versions is not one (a byte changed, cut
    short, a folder or a link that loops in its place), else None (also when there is none).
    Commands read it as empty, never failing on it: a newest version manifest lost together
    with its hint then goes unnoticed, until the next write to each table records it again."""
    if location.path is None:
        return None
    path = location.path / "_octobrain" / MARKS
    try:
        raw = read_regular(path, _MARK_BYTES)[0]
    except FileNotFoundError:
        return None
    except OSError as exc:  # (`TooLarge` too)
        return f"cannot be read ({exc.strerror or exc})"
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return "is not JSON"
    if not isinstance(record, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool)
        for k, v in record.items()
        if k != RECORDED_AT
    ):
        return "is not a record of table versions"
    return None


def _parse(raw: bytes) -> tuple[dict[str, int], dict[str, float]]:
    """The table → version entries of a mark object, and when each was set (where it says);
    anything else in it is ignored (an object that is no mark guards nothing, and the next
    commit writes it again whole)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return {}, {}
    if not isinstance(record, dict):
        return {}, {}
    marks = {
        str(name): version
        for name, version in record.items()
        if isinstance(version, int) and not isinstance(version, bool) and version > 0
    }
    times = record.get(RECORDED_AT)
    at = {
        name: float(when)
        for name, when in (times.items() if isinstance(times, dict) else ())
        if name in marks
        and isinstance(when, int | float)
        and not isinstance(when, bool)
        and math.isfinite(when)
    }
    return marks, at


class Commits:
    """The versions one store's handles commit under its write lock, recorded (`HighWater.record`)
    once when the outermost hold of the lock ends, still under the lease: one request however
    many commits the hold made, with the checksums of the deletion files they read
    (`deletion_sums`). Used under that lock only (holds nest in one thread)."""

    def __init__(self, marks: HighWater) -> None:
        self._marks = marks
        self._depth = 0
        self._written: dict[str, int] = {}

    @contextmanager
    def held(self) -> Iterator[None]:
        """Wrap a hold of the write lock (inside it)."""
        outermost = self._depth == 0
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if outermost:
                written, self._written = self._written, {}
                self._marks.record(written)
                if written:
                    deletion_sums.record(self._marks.location, written)

    def wrote(self, *tables: lancedb.table.Table) -> None:
        """Call right after a commit to `tables` under the lock (`HighWater.note`)."""
        self._marks.note(self._written, *tables)
