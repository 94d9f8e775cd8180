"""The stores the resident service keeps open (`BrainCache`): one `BrainPool` per store, shared
by the CLI commands and the MCP sessions it runs, and what it does to them between and after
commands: access counts committed, maintenance that writes fell due for, and each store
settled before the service exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from octobrain.config import Config
    from octobrain.knowledge import Knowledge
    from octobrain.memory.brain import Brain
    from octobrain.server.pool import BrainPool

log = logging.getLogger("octobrain.cli.service_daemon")  # the service's own log (its log file)


class BrainCache:
    """One `BrainPool` per store, shared by the CLI commands and the MCP sessions: one model,
    one LanceDB connection and one mirror per store. Use it under the service's run lock."""

    def __init__(self, config: Config, lock: threading.Lock) -> None:
        self.config = config
        self._lock = lock
        self._pools: dict[str, BrainPool] = {}
        self._pools_lock = threading.Lock()  # MCP sessions look pools up outside the run lock
        self._knowledge_held: list[threading.Lock] = []  # (by the command running: `knowledge`)
        self._turn = threading.local()  # `.pool`: whose knowledge lock this thread holds

    def pool(self, cwd: str) -> BrainPool:
        """The pool of the store a process started in `cwd` opens."""
        from octobrain.config import resolve_storage_uri
        from octobrain.server.pool import BrainPool

        uri = resolve_storage_uri(self.config)  # a relative storage.uri follows the cwd
        if "://" not in uri:
            uri = os.path.join(cwd, uri)
        with self._pools_lock:
            pool = self._pools.get(uri)
            if pool is None:
                pool = self._pools[uri] = BrainPool(self.config, uri=uri, lock=self._lock)
            return pool

    def brain(self, scope: str, workdir: Path, session_id: str = "", role: str = "") -> Brain:
        root = self.pool(os.getcwd()).shared_root()
        return root.for_scope(scope, workdir=workdir, session_id=session_id, role=role)

    def knowledge(self, scope: str, session_id: str, cwd: Path) -> Knowledge:
        """The warm knowledge facade a command run in `cwd` works with (`BrainPool.knowledge`:
        the model and the knowledge tables shared with the MCP sessions). The command holds
        its pool's knowledge lock until it ends (`flush`), unless it took it before its turn
        (`knowledge_turn`): a hosted session's knowledge call runs under that lock alone, on
        the same tables."""
        ahead: BrainPool | None = getattr(self._turn, "pool", None)
        pool = ahead or self.pool(os.getcwd())
        knowledge = pool.knowledge(scope, cwd, session_id)
        if ahead is None and not self._knowledge_held:
            pool.knowledge_lock.acquire()
            self._knowledge_held.append(pool.knowledge_lock)
        return knowledge

    @contextlib.contextmanager
    def knowledge_turn(self, cwd: str, seconds: float) -> Iterator[bool]:
        """Hold the knowledge lock of the store a knowledge command run in `cwd` works on,
        taken before the run lock, for the command's whole turn; whether it was had within
        `seconds`. Taken inside the run lock, a hosted session's `index` held every memory
        command behind it, each falling back in-process after `service.wait_seconds`."""
        pool = self.pool(os.path.realpath(cwd))
        if not pool.knowledge_lock.acquire(timeout=seconds):
            yield False
            return
        self._turn.pool = pool
        try:
            yield True
        finally:
            self._turn.pool = None
            pool.knowledge_lock.release()

    def warm_knowledge(self) -> None:
        """Open the knowledge tables of the store the service warmed up and read them into
        their mirror, as its first knowledge command did (0.5 s of a first `knowledge search`
        at 4,500 chunks, 0.09 s warm), when it has them (none are made). The run lock is held
        only to find them: memory commands go on meanwhile."""
        from octobrain.store.schema import CHUNKS

        pool = self.pool(os.getcwd())
        try:
            with self._lock:
                if not pool.loaded or pool.shared_root().store.location.table_gone(CHUNKS):
                    return
                knowledge = pool.knowledge("", Path("/"), "")
            with pool.knowledge_lock:
                knowledge.index_mirror.refresh()
            log.info("knowledge tables read in, chunks: %d", len(knowledge.index_mirror.rows))
        except Exception:  # a damaged knowledge table is reported by its first command
            log.warning("knowledge warm-up failed", exc_info=True)

    def flush(self) -> None:
        """Let go of the knowledge lock a command took, commit queued access counts (a new
        process would at exit), and note the store's files as the command left them."""
        while self._knowledge_held:
            self._knowledge_held.pop().release()
        for pool in self._all():
            pool.flush()
            pool.note_store()

    def settle(self) -> None:
        """Before the service exits: each store's access counts committed and its snapshot
        left at the store's version (`BrainPool.settle`)."""
        for pool in self._all():
            try:
                pool.settle()
            except Exception:  # the next command reports a store that cannot be read
                log.warning("store not settled before exit", exc_info=True)

    def maintain(self) -> None:
        """The maintenance passes writes fell due for, with the mirrors caught up after them."""
        for pool in self._all():
            pool.maintain()

    def maintenance_due(self) -> bool:
        return any(pool.maintenance_due() for pool in self._all())

    def _all(self) -> list[BrainPool]:
        with self._pools_lock:
            return list(self._pools.values())
