"""Lazy sleep: the first CLI command or MCP server start of the day runs a sleep pass for its
scope in the background — no daemon, never blocking or failing the user's call.

A pass that left rows its conflict check has yet to reach (a burst over its budget,
`memory.sweep`) makes the next one due after `CATCH_UP_HOURS`, not `interval_hours`: at one
pass a day a burst of 21,500 rows took 42 days to check. It is still one pass per process
start, under the same lock, at most one an hour; once none are left the interval is the day.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from octobrain.config import data_dir
from octobrain.files import read_regular, replace_whole
from octobrain.heap import trim_heap
from octobrain.times import utcnow

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain

__all__ = ["sleep_marker", "start_background_sleep"]

log = logging.getLogger(__name__)

CATCH_UP_HOURS = 1.0  # between passes while the last left rows unchecked

_started: set[tuple[str, str]] = set()
_started_lock = threading.Lock()


def sleep_marker(uri: str, scope: str, marker_dir: Path | None = None) -> Path:
    """The marker file recording the last successful pass for one local store and scope."""
    return (marker_dir or data_dir() / "sleep") / f"{_key(uri, scope)}.json"


def _key(uri: str, scope: str) -> str:
    return hashlib.sha256(f"{uri}\0{scope}".encode()).hexdigest()[:20]


class _Schedule:
    """Where the last successful pass is recorded and which lock guards a pass.

    A local store keeps both on this machine (a marker file and a file lock); a store on object
    storage keeps them in the store, so a whole team runs one pass per interval, not one each.
    """

    def __init__(self, brain: Brain, marker_dir: Path | None) -> None:
        self._location = brain.store.location
        self.remote = self._location.remote
        self._name = f"sleep/{_key(brain.uri, brain.scope)}.json"
        self._marker = sleep_marker(brain.uri, brain.scope, marker_dir)
        self.lock_name = f"sleep-{_key(brain.uri, brain.scope)}"

    def due(self, interval_hours: float, now: datetime) -> bool:
        try:
            if self._location.remote:
                record = self._location.read_json(self._name) or {}
            else:
                record = json.loads(read_regular(self._marker, 1 << 20)[0])  # a FIFO: OSError
            finished = datetime.fromisoformat(record["finished_at"])
            left = record.get("unchecked", 0)
        except (OSError, ValueError, KeyError, TypeError):
            return True  # no record (or a damaged one): never ran successfully
        if isinstance(left, int) and not isinstance(left, bool) and left > 0:
            interval_hours = min(interval_hours, CATCH_UP_HOURS)  # a burst still to check
        return now - finished >= timedelta(hours=interval_hours)

    def lock(self) -> Any:
        """The pass lock, failing at once (filelock.Timeout or StorageError) when held."""
        if self._location.remote:
            return self._location.lock(self.lock_name, 0)
        from filelock import FileLock

        self._marker.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(self._marker.with_suffix(".lock")), timeout=0)

    def failed_anew(self, reason: str) -> bool:
        """Note on this machine that a pass failed for `reason`; whether that is news, not
        the reason the last pass failed for too (a read-only store failed every command's
        pass, each adding the same line to the command's stderr)."""
        failed = self._marker.with_suffix(".failed")
        before: object = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            before = json.loads(read_regular(failed, 1 << 16)[0]).get("reason")
        noted = {"reason": reason, "failed_at": utcnow().isoformat()}
        try:
            failed.parent.mkdir(parents=True, exist_ok=True)
            replace_whole(failed, json.dumps(noted).encode())
        except OSError:
            return True  # (nowhere to note it: said every time)
        return before != reason

    def record(self, record: dict[str, Any]) -> None:
        """Record a successful pass (atomically: whole or absent)."""
        with contextlib.suppress(OSError):  # a failure noted since is over
            self._marker.with_suffix(".failed").unlink(missing_ok=True)
        if self._location.remote:
            self._location.write_json(self._name, record)
            return
        replace_whole(self._marker, json.dumps(record).encode())


def start_background_sleep(
    brain: Brain, *, marker_dir: Path | None = None
) -> threading.Thread | None:
    """Start a sleep pass (consolidation, then archiving) for `brain`'s scope in a background
    thread, if enabled and `interval_hours` have passed since the last successful one.

    Called once at startup by the CLI and the MCP server; later calls in the same process are
    no-ops. It never raises and never blocks: the pass runs under a per-scope lock shared by
    every process that uses the store (another one already on it → skip), on its own store
    connection, logs failures, and records the pass only after success. Returns the thread
    (tests join it), or None.
    """
    try:
        cfg = brain.config.consolidation
        key = (brain.uri, brain.scope)
        with _started_lock:
            if not cfg.sleep_enabled or key in _started:
                return None
            _started.add(key)
        schedule = _Schedule(brain, marker_dir)
        # A local marker is read here; a record in a bucket is a request, read in the thread.
        if not schedule.remote and not schedule.due(cfg.interval_hours, utcnow()):
            return None
        # The pass's store calls start thread pools, which register an exit hook on first
        # import; a command that fails at once is already shutting down by then, and the
        # import would fail there. Importing it here, in the caller's thread, is cheap.
        import concurrent.futures.thread  # noqa: F401

        thread = threading.Thread(
            target=_pass_then_trim, args=(brain, schedule), name="octobrain-sleep", daemon=False
        )
        thread.start()
        return thread
    except Exception:
        log.warning("could not start the sleep pass", exc_info=True)
        return None


def _pass_then_trim(brain: Brain, schedule: _Schedule) -> None:
    """`_lazy_pass`, then what it used handed back (`heap.trim_heap`): an MCP server kept the
    pass's rows, vectors and clusters with malloc and Arrow for its life (a 10k scope: 371 MB
    before the pass, 681 after it, 441 once trimmed)."""
    _lazy_pass(brain, schedule)
    trim_heap()  # (its own Brain and mirror are gone with the pass's frame)


def _lazy_pass(brain: Brain, schedule: _Schedule) -> None:
    from filelock import Timeout

    from octobrain.store.endpoint import object_store_reason as reason
    from octobrain.store.failures import ModelMismatch
    from octobrain.store.lease import StoreBusy
    from octobrain.store.sql import sql_str
    from octobrain.store.watch import odd_file

    cfg = brain.config.consolidation
    try:
        odd = odd_file(brain.store.location)
        if odd is not None:  # Lance would wait on it for good: retried next start
            log.warning(
                "sleep pass for %r skipped: %s in the store is not a regular file", brain.scope, odd
            )
            return
        if not schedule.due(cfg.interval_hours, utcnow()):
            return  # (object storage) a teammate's process ran today's pass
        if brain.store.count(f"scope = {sql_str(brain.scope)}") == 0:
            # Nothing to consolidate, and no lock or record left behind: a client naming a
            # new scope on every call (even a read) must not leave files for each one.
            return
        with schedule.lock():
            if not schedule.due(cfg.interval_hours, utcnow()):
                return  # another process finished a pass while we waited to start
            # Our own Brain: its own store connection and mirror, nothing shared with callers.
            own = type(brain)(
                brain.scope, config=brain.config, embedder=brain.embedder, uri=brain.uri
            )
            report = own.sleep_consolidate()
            if report.damaged_records:
                log.warning("sleep pass for %r: %s", brain.scope, report.damage_said())
            if report.unchecked:
                log.info(
                    "sleep pass for %r left %d older memories for a later conflict check",
                    brain.scope,
                    report.unchecked,
                )
            schedule.record(
                {
                    "scope": brain.scope,
                    "store": brain.uri,
                    "finished_at": utcnow().isoformat(),
                    "consolidated": len(report.consolidations),
                    "archived": len(report.archived),
                    "conflicts": len(report.conflicts),
                    "unchecked": report.unchecked,
                }
            )
    except (Timeout, StoreBusy):
        log.info("sleep pass for %r already running in another process", brain.scope)
    except ModelMismatch:
        # The command says so itself (or is `reembed`, which is the remedy): nothing to add.
        log.info("sleep pass for %r waits until the store is re-embedded", brain.scope)
    except Exception as exc:
        if sys.is_finalizing() or "after shutdown" in str(exc):
            # The command ended before the pass could; it is not a store fault.
            log.info("sleep pass for %r cut short by the process exiting", brain.scope)
            return
        # One line for the user's log (the command itself reports an unreachable store), said
        # again only when the reason changes: the pass is retried at every start meanwhile.
        said = reason(exc)
        level = logging.WARNING if schedule.failed_anew(said) else logging.INFO
        log.log(level, "sleep pass for %r failed, retried next start: %s", brain.scope, said)
        log.debug("sleep pass failure", exc_info=True)
