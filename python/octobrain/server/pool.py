"""`BrainPool`: one `Brain` per scope, shared by every call and every HTTP session.

The first tool call loads the model and opens LanceDB (once); later scopes reuse both through
`Brain.for_scope`. Memory calls run one at a time in a worker thread: they take milliseconds,
and the facade is not documented as safe for concurrent use from threads. Knowledge calls
(which may fetch and embed a whole document) queue on a lock of their own, so they never hold
up memory calls; the two share only the embedder, which is safe across threads. For the same
reason an `ingest` takes the lock twice, to find the turns to store and to write them, and
embeds them in between without it, one ingest at a time (`embed`).

A long-lived pool checks, before each call, that the store's files are still the ones it
opened (`StoreWatch`: a few `stat` calls); a table or manifest deleted or replaced underneath
makes it reopen, so the call reports the damage as a new process would, never answers from
memory.
"""

from __future__ import annotations

import logging
import threading
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from octobrain.config import Config, load_config
from octobrain.errors import OctobrainError
from octobrain.heap import resident_bytes, trim_heap

if TYPE_CHECKING:
    from octobrain.knowledge import Knowledge
    from octobrain.knowledge.generation import Progress
    from octobrain.knowledge.index import ChunkIndex
    from octobrain.knowledge.sources import Fetched
    from octobrain.knowledge.store import KnowledgeStore
    from octobrain.memory.brain import Brain
    from octobrain.store.watch import StoreWatch

T = TypeVar("T")
# What a knowledge facade is kept by: scope, session, local roots, working directory.
_FacadeKey = tuple[str, str, "tuple[Path, ...] | None", "Path | None"]
log = logging.getLogger(__name__)
# Scopes (and knowledge facades) kept ready; an unlocked client may name a new scope on every
# call, so the least recently used beyond this are dropped (they share the root's model, store
# and mirror, and hold nothing of their own that is not written: rebuilt when named again).
SCOPES_KEPT = 64
# A knowledge call or an ingest's embedding that grew the process by more than this hands what
# it freed back to the system after it (`heap.trim_heap`): a 45 MB file read, normalised and cut
# left the server 0.4 GB larger after each search naming it, and the model's activations for a
# 105 KB document 260-270 MB.
TRIM_AFTER = 64 << 20


class BrainPool:
    """Lazily built, cached Brains keyed by scope."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        uri: str | Path | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.config = config if config is not None else load_config()
        self._uri = uri
        # The resident service passes its command lock: CLI commands and MCP calls then take
        # turns on the same Brains.
        self._lock = lock if lock is not None else threading.Lock()
        self.knowledge_lock = threading.Lock()  # knowledge calls, apart from memory calls
        # One `ingest` embedding at a time, whoever asks: each holds its conversation's turns
        # and the model's working memory (40 at once reached 8.6 GB and starved every call).
        self._embed_lock = threading.Lock()
        self._root: Brain | None = None
        self._brains: OrderedDict[str, Brain] = OrderedDict()
        self._knowledge: OrderedDict[_FacadeKey, Knowledge] = OrderedDict()
        # The knowledge tables and their mirror, shared by every facade: each session (and
        # scope) built a mirror of every chunk of its own, 5 s and 10-30 MB a session, kept.
        # A facade sees what its scope and session may (`ChunkIndex.allowed`).
        self._knowledge_tables: tuple[KnowledgeStore, ChunkIndex] | None = None
        self._watch: StoreWatch | None = None
        self._odd_said: str | None = None  # the odd file background work was last skipped for
        # Session notes need a session; a client that names none gets one per server process.
        self.default_session_id = uuid.uuid4().hex

    @property
    def loaded(self) -> bool:
        """Whether the model and the store have been loaded."""
        return self._root is not None

    def _store_changed(self) -> bool:
        """Whether the open store's files changed underneath since the last look."""
        from octobrain.store.location import local_path
        from octobrain.store.watch import StoreWatch

        path = None if self._root is None else local_path(self._root.uri)
        if path is None:
            return False
        if self._watch is None:
            self._watch = StoreWatch(path)
        return self._watch.changed()

    def _check_store(self) -> None:
        """Forget the open store when its files changed underneath, and commit the access
        counts that processes of their own kept meanwhile, so this call sees them as they
        would (`MemoryStore.count_kept_access`); hold the pool lock."""
        if not self._store_changed():
            if self._root is not None:
                self._root.store.count_kept_access()
            return
        log.info("the store's tables or manifest changed underneath; reopening it")
        assert self._root is not None
        try:
            self._root.flush()
        except Exception:  # the queued access counts of a store that is gone
            log.info("could not commit access counts before reopening", exc_info=True)
        self._root, self._watch = None, None
        self._brains.clear()
        self._knowledge.clear()
        self._knowledge_tables = None

    def shared_root(self) -> Brain:
        """The Brain every scope of this pool shares (model, store, mirror); hold the lock."""
        self._check_store()
        if self._root is None:
            from octobrain.memory.brain import Brain

            self._root = Brain("", config=self.config, uri=self._uri)
            self._store_changed()
        return self._root

    def flush(self) -> None:
        """Commit the access counts queued by calls (a new process would at exit)."""
        if self._root is not None:
            self._root.flush()

    def settle(self) -> None:
        """Before this process goes away: commit the queued access counts, catch the mirror up
        and leave its snapshot at that version, so the next new process is served by it
        without opening LanceDB (`Corpus.save_snapshot`); hold the lock."""
        root = self._root
        if root is not None and not self._odd_file(root, "settling"):
            root.flush()
            corpus = root.retriever.corpus
            corpus.refresh()
            corpus.save_snapshot()

    def maintenance_due(self) -> bool:
        """Whether a write of this pool's store left a maintenance pass for later."""
        root = self._root
        return root is not None and root.store.maintenance_due

    def maintain(self) -> None:
        """Run the store maintenance a write fell due for and catch the mirror up with what it
        moved (what the next call would otherwise do), once calls have had their answers
        (`MemoryStore.defer_maintenance`), and note the store's files as it left them; hold
        the lock."""
        root = self._root
        if (
            root is not None
            and not self._odd_file(root, "maintenance")
            and root.store.maintain_if_due()
        ):
            root.retriever.corpus.refresh()
            self.note_store()

    def _odd_file(self, root: Brain, work: str) -> bool:
        """Whether a file of the store's tables is not regular (`store.watch.odd_file`):
        `work` off the call path, which would read it and wait on it for good, is then
        skipped (the next call names the file), said once a file."""
        from octobrain.store.watch import odd_file

        odd = odd_file(root.store.location)
        if odd is not None and odd != self._odd_said:
            log.warning("%s skipped: %s in the store is not a regular file", work, odd)
        self._odd_said = odd
        return odd is not None

    def note_store(self) -> None:
        """Record the store's tables and manifest as they are after a call that may have
        created a table (the call's own change, not one underneath)."""
        if self._watch is not None:
            self._watch.settle()

    def _brain(self, scope: str, workdir: Path | None) -> Brain:
        self._check_store()
        brain = _recent(self._brains, scope)
        if brain is None:
            from octobrain.memory.sleep_startup import start_background_sleep

            if self._root is None:
                from octobrain.memory.brain import (
                    Brain,  # heavy: pyarrow, then LanceDB on first use
                )

                brain = Brain(scope, config=self.config, uri=self._uri, workdir=workdir)
                self._root = brain
                self._store_changed()
            else:
                brain = self._root.for_scope(scope, workdir=workdir)
            _keep(self._brains, scope, brain)
            # Lazy sleep consolidation for each scope the server serves: a background thread
            # under a cross-process lock that never blocks or fails this call.
            start_background_sleep(brain)
        return brain

    def call(
        self,
        scope: str,
        workdir: Path | None,
        fn: Callable[[Brain], T],
        session_id: str = "",
        role: str = "",
    ) -> T:
        """Run `fn` with the Brain of `scope` (blocking; call it from a worker thread).
        With a `session_id`, memories it writes are linked to that session's earlier ones;
        with a `role`, it writes that role's memories and reads those and role-less ones."""
        with self._lock:
            brain = self._brain(scope, workdir)
            if session_id or role or (workdir is not None and workdir != brain.workdir):
                # Sessions from other directories (the resident service) share the Brain.
                brain = brain.for_scope(
                    scope, workdir=workdir or brain.workdir, session_id=session_id, role=role
                )
            try:
                return fn(brain)
            except Exception as exc:
                named = self._named(brain, exc)
                if named is exc:
                    raise
                raise named from exc
            finally:
                self.note_store()

    @staticmethod
    def _named(brain: Brain, exc: Exception) -> Exception:
        """A failed read of the store as the data file and table that are damaged, when a look
        at their sizes finds one (a truncated file read "a table cannot be read (failed to
        fill whole buffer)", naming neither); `exc` itself otherwise."""
        from octobrain.store.failures import TableUnreadable
        from octobrain.store.manifest import read_failure

        cause = exc.cause if isinstance(exc, TableUnreadable) else exc  # (as LanceDB raised it)
        if isinstance(cause, OctobrainError) or read_failure(cause) is None:
            return exc
        try:
            damaged = brain.store.damaged_data()
        except Exception:  # (the table itself does not open: the first error says enough)
            return exc
        return exc if damaged is None else damaged

    def call_knowledge(
        self,
        scope: str,
        workdir: Path | None,
        session_id: str | None,
        fn: Callable[[Knowledge], T],
        local_roots: tuple[Path, ...] | None = None,
        prefetched: dict[str, Fetched] | None = None,
        stop: threading.Event | None = None,
        *,
        progress: Progress | None = None,
    ) -> T:
        """Run `fn` with the knowledge facade of (scope, session), sharing the model and store:
        "" is the pool's default session, None none (a facade without session notes). Local
        files are read only under `local_roots` (None: anywhere). Given `prefetched`, the call
        fetches no URL under the lock: one it needs and the map lacks raises `FetchFirst`.
        Once `stop` is set (its client cancelled the call or is gone), its embedding stops at
        the next batch, nothing written (`Stopped`); `progress` is told the chunks embedded.

        Only finding the facade holds the pool lock: indexing a long document runs under the
        knowledge lock, so memory calls (`remember`, `memorize`) keep answering meanwhile."""
        with self._lock:
            sid = self.default_session_id if session_id == "" else (session_id or "")
            knowledge = self.knowledge(scope, workdir, sid, local_roots, sleep=True)
        with self.knowledge_lock:
            before = resident_bytes()
            knowledge.prefetched, knowledge.stop, knowledge.progress = prefetched, stop, progress
            try:
                return fn(knowledge)
            except Exception as exc:
                # A refused document (too many chunks, too large) is held by the frames of
                # the error's traceback: freed now, as the answer names only the error.
                traceback.clear_frames(exc.__traceback__)
                raise
            finally:
                knowledge.prefetched, knowledge.stop, knowledge.progress = None, None, None
                self._note_own_tables()
                self._trim_after(before)

    def knowledge(
        self,
        scope: str,
        workdir: Path | None,
        session_id: str,
        local_roots: tuple[Path, ...] | None = None,
        *,
        sleep: bool = False,
    ) -> Knowledge:
        """The kept knowledge facade of (scope, session, local roots, workdir), built on the
        shared model, store and knowledge tables, after the store's files were looked at (a
        facade kept reads the tables as they are now); hold the pool lock, and use it under
        `knowledge_lock` (the resident service's commands, `call_knowledge`). `sleep`: a new
        facade starts its scope's background sleep pass, as a memory call does (an MCP
        server's; a knowledge command run in a new process starts none)."""
        self._check_store()
        key = (scope, session_id, local_roots, workdir)
        knowledge = _recent(self._knowledge, key)
        if knowledge is None:
            from octobrain.knowledge import Knowledge

            root = self._brain(scope, workdir) if sleep else self.shared_root()
            knowledge = Knowledge(
                scope,
                config=root.config,
                embedder=root.embedder,
                uri=root.uri,
                session_id=session_id,
                cwd=workdir,
                local_roots=local_roots,
                tables=self._knowledge_tables,
            )
            if self._knowledge_tables is None:
                self._knowledge_tables = (knowledge.kstore, knowledge.index_mirror)
            _keep(self._knowledge, key, knowledge)
        return knowledge

    @staticmethod
    def _trim_after(before: int | None) -> None:
        """Hand back what a call that grew the process by over `TRIM_AFTER` since `before`
        freed: a document read and cut stays with malloc, the model's activations with
        onnxruntime (`heap.trim_heap`)."""
        after = resident_bytes()
        if before is not None and after is not None and after - before > TRIM_AFTER:
            trim_heap()

    def _note_own_tables(self) -> None:
        """After a knowledge call: the tables its first note or index made are its own, not
        another process's change (which would reopen the store and drop every Brain). Only if
        the pool lock is free: a command the resident service runs holds it to its end, and
        the call's answer does not wait for that (the next call then reopens, as before)."""
        if self._lock.acquire(blocking=False):
            try:
                self.note_store()
            finally:
                self._lock.release()

    def embed(self, work: Callable[[], T]) -> T:
        """Run an `ingest`'s embedding (`IngestPlan.embed`) outside the pool lock, one at a
        time (blocking; call it from a worker thread)."""
        with self._embed_lock:
            before = resident_bytes()
            try:
                return work()
            finally:
                self._trim_after(before)

    def warm_up(self, scope: str, workdir: Path | None) -> None:
        """Load the model, LanceDB and the mirror ahead of the first call (run in a thread).

        The protocol never waits for this: `initialize` and `tools/list` are answered while it
        runs, and a tool call that arrives meanwhile simply queues behind it on the pool lock.
        """
        try:
            self.call(scope, workdir, lambda brain: brain.warm_up())
        except OctobrainError as exc:  # a damaged store: the first real call answers with it
            log.warning("background warm-up failed: %s", exc)  # (its line, not a traceback)
        except Exception:  # a store that cannot open is reported by the first real call
            log.warning("background warm-up failed", exc_info=True)


K = TypeVar("K")
V = TypeVar("V")


def _recent(kept: OrderedDict[K, V], key: K) -> V | None:
    """The value kept under `key`, marked as the most recently used (None: not kept)."""
    value = kept.get(key)
    if value is not None:
        kept.move_to_end(key)
    return value


def _keep(kept: OrderedDict[K, V], key: K, value: V) -> None:
    """Keep `value` under `key`, dropping the least recently used beyond `SCOPES_KEPT`."""
    kept[key] = value
    if len(kept) > SCOPES_KEPT:
        kept.popitem(last=False)
