"""Access counting off the `remember` path.

Counting an access is a commit: on a local disk ~15 ms under the write lock (more than the
search itself at 10k memories), on a bucket a dozen requests and the write lease. So `remember`
only queues the ids due for a bump; one background commit per interval (at least a second;
`storage.remote_refresh_ms` on a bucket) counts them all, and `Brain.flush()` commits the
queue at once. After each commit the registered mirrors apply the bump in place, so the next
query neither re-reads the table nor counts the same access twice. What `memory remember`
queued (flushed once its answer is out) and what is left when a process exits normally are
kept on a local store for the next process that opens the tables (the resident service: its
next call), not committed (`store.accessed`; the service commits its own): a process a
snapshot served then needs no LanceDB for them, and no process of its own makes a version
that would keep the next one from being served by the snapshot.

An access count is a ranking signal, not something a user wrote: a process killed with bumps
still queued loses at most one interval of them, never a memory.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from octobrain.errors import StorageError
from octobrain.store import MemoryStore
from octobrain.store.watch import odd_file

log = logging.getLogger(__name__)


class Mirror(Protocol):
    """What the queue tells after a commit: the in-process mirror of the same table."""

    def note_own_access(self, ids: Sequence[str], now: datetime, version: int | None) -> None: ...


class AccessQueue:
    """Pending access bumps of one store, committed together by a background thread."""

    def __init__(self, store: MemoryStore, window: timedelta) -> None:
        # Its own connection: the caller's table handles are never used from two threads.
        self._store = MemoryStore(store.location, store.model_id, store.dim)
        self._window = window
        self._interval = max(store.location.refresh_s, 1.0)
        self._pending: set[str] = set()
        self._latest: datetime | None = None
        self._mirrors: weakref.WeakSet[Mirror] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._committing = threading.Lock()  # held by a flush while it commits
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()  # set by `stop`: commit now and end the thread
        _LIVE.add(self)

    def add(self, ids: Sequence[str], now: datetime, mirror: Mirror | None = None) -> None:
        """Queue one access for each id (queued twice within an interval, it counts once —
        as two calls within the access window would). `mirror` hears of the commit."""
        with self._lock:
            self._pending.update(ids)
            self._latest = now if self._latest is None else max(self._latest, now)
            if mirror is not None:
                self._mirrors.add(mirror)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="octobrain-access", daemon=True
                )
                self._thread.start()

    def flush(self, *, keep: bool = False) -> None:
        """Commit every queued bump now, in one commit stamped with the latest access time;
        a commit the background thread is making is waited for first (the process's exit
        flush must not end it half made, `cli.launch.exit_now`). `keep` (a process of its
        own: its exit, `memory remember`): leave them to the next process that opens the
        tables instead where the store may (`MemoryStore.keep_access`), so that this one needs
        no LanceDB for them (a snapshot may have served it without) and makes no version that
        the next new process's snapshot would lack."""
        with self._committing:
            with self._lock:
                ids, when = sorted(self._pending), self._latest
                self._pending, self._latest = set(), None
                mirrors = list(self._mirrors)
            if not ids or when is None:
                return
            odd = odd_file(self._store.location)
            if odd is not None:  # Lance would wait on it for good, this lock held meanwhile
                log.warning(
                    "access counts not recorded: %s in the store is not a regular file", odd
                )
                return
            try:
                kept = keep and self._store.keep_access(ids, when, min_interval=self._window)
                version = (
                    None
                    if kept
                    else self._store.record_access(ids, when, min_interval=self._window)
                )
            except (OSError, StorageError) as exc:  # a read-only store still answers questions
                log.warning("access counts not recorded: %s", exc)
                return
            except Exception:
                log.warning("access counts not recorded", exc_info=True)
                return
        for mirror in mirrors:
            mirror.note_own_access(ids, when, version)

    def stop(self) -> None:
        """Commit every queued bump now and end the background thread (`Brain.close`); a
        later `add` starts another."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._wake.set()
            thread.join()
            self._wake.clear()
        self.flush()  # (what was queued while the thread ended)

    def _run(self) -> None:
        # Runs while there is something to count; the next `add` starts a new one.
        while True:
            stopping = self._wake.wait(self._interval)
            self.flush()
            with self._lock:
                if stopping or not self._pending:
                    self._thread = None
                    return


# The queues alive, flushed as the process exits. Weakly: a queue lives as long as its store
# and, while bumps are pending, its thread (a strong `atexit` entry per queue kept every store
# a process ever opened, and its LanceDB connection, until exit).
_LIVE: weakref.WeakSet[AccessQueue] = weakref.WeakSet()


@atexit.register
def _flush_live() -> None:
    for queue in list(_LIVE):
        queue.flush(keep=True)
