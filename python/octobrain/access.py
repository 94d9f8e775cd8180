"""Access counting for stores on object storage, off the `remember` path.

On a local disk, `remember` commits its access bump at once (a few ms). On a bucket that commit is
a dozen requests and the write lease, which would triple `remember`'s latency. There, the ids
due for a bump are queued and one background commit per `storage.remote_refresh_ms` (at least
every second) counts them all; the queue is also flushed when the process exits normally.

An access count is a ranking signal, not something a user wrote: a process killed with bumps
still queued loses at most one interval of them, never a memory.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from octobrain.errors import StorageError
from octobrain.store import MemoryStore

log = logging.getLogger(__name__)


class AccessQueue:
    """Pending access bumps of one store, committed together by a background thread."""

    def __init__(self, store: MemoryStore, window: timedelta) -> None:
        # Its own connection: the caller's table handles are never used from two threads.
        self._store = MemoryStore(store.location, store.model_id, store.dim)
        self._window = window
        self._interval = max(store.location.refresh_s, 1.0)
        self._pending: set[str] = set()
        self._latest: datetime | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        atexit.register(self.flush)

    def add(self, ids: Sequence[str], now: datetime) -> None:
        """Queue one access for each id (queued twice within an interval, it counts once —
        as two calls within the access window would)."""
        with self._lock:
            self._pending.update(ids)
            self._latest = now if self._latest is None else max(self._latest, now)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="octobrain-access", daemon=True
                )
                self._thread.start()

    def flush(self) -> None:
        """Commit every queued bump now, in one commit stamped with the latest access time."""
        with self._lock:
            ids, when = sorted(self._pending), self._latest
            self._pending, self._latest = set(), None
        if not ids or when is None:
            return
        try:
            self._store.record_access(ids, when, min_interval=self._window)
        except StorageError as exc:  # a read-only store still answers questions
            log.warning("access counts not recorded: %s", exc)
        except Exception:
            log.warning("access counts not recorded", exc_info=True)

    def _run(self) -> None:
        while True:  # a daemon thread: it ends with the process, after the exit flush
            time.sleep(self._interval)
            self.flush()
