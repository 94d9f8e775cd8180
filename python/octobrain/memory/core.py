"""What every part of `Brain` stands on: its scope and role, config, embedder and store (opened
on first use), the mirror and retriever, and the checks every input goes through (text under the
secrets policy, ids by full UUID or unique prefix, visibility from the scope and role)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from octobrain.config import Config
from octobrain.embed.base import Embedder
from octobrain.embed.factory import facade_parts
from octobrain.errors import InvalidInput, json_type
from octobrain.field_checks import check_id_ref
from octobrain.files import check_path
from octobrain.memory import corpus_snapshot
from octobrain.memory.consolidation import Consolidator
from octobrain.memory.corpus import Corpus
from octobrain.memory.search import Retriever
from octobrain.memory.snapshot import SnapshotDir
from octobrain.memory.snapshot import default_root as snapshot_root
from octobrain.models import Memory
from octobrain.safe_text import check_label, check_text, check_visible
from octobrain.scope import scope_named, validate_scope
from octobrain.secrets import screen, screen_each
from octobrain.store import MemoryStore, NotFound, respell
from octobrain.store.closing import Closable
from octobrain.store.location import StoreLocation, is_remote, redact
from octobrain.store.sql import Sight

_B = TypeVar("_B", bound="BrainBase")
MAX_PREFIX_CANDIDATES = 10  # listed when an id prefix is ambiguous


class BrainBase(Closable):
    """Memories of one scope (plus the global ones it can see), and of one role when given
    (plus those of no role): state and shared checks."""

    def __init__(
        self,
        scope: str,
        *,
        config: Config | None = None,
        embedder: Embedder | None = None,
        uri: str | Path | None = None,
        workdir: Path | None = None,
        session_id: str = "",
        role: str = "",
    ) -> None:
        self.scope = validate_scope(scope)
        # An agent's role ("reviewer"): what it stores is that role's, and it sees that role's
        # memories and those of no role; with none ("") it stores role-less ones, sees all.
        self.role = check_label("role", role)
        # Memories written through this Brain are linked to the session's earlier ones.
        if not isinstance(session_id, str):  # (any text: `temporal.session_tag` cleans it)
            raise InvalidInput("session_id", f"must be a string, got {json_type(session_id)}")
        self.session_id = session_id
        self.config, self.embedder, self.uri = facade_parts(config, embedder, uri)
        self.workdir = None if workdir is None else check_path("workdir", workdir)
        self._store: MemoryStore | None = None
        self._retriever: Retriever | None = None
        self._consolidator: Consolidator | None = None

    @property
    def store(self) -> MemoryStore:
        self._check_open()
        if self._store is None:
            location = StoreLocation.from_config(self.config, self.uri)
            self._store = MemoryStore(location, self.embedder.model_id, self.embedder.dim)
            respell.bring_up(self._store)  # (a store an earlier version wrote)
        return self._store

    @property
    def retriever(self) -> Retriever:
        self._check_open()
        if self._retriever is None:
            corpus = Corpus(
                self.store,
                snapshots=self._snapshots(),
                snapshot_min_rows=self.config.search.snapshot_min_rows,
            )
            self._retriever = Retriever(self.store, corpus, self.embedder, self.config)
        return self._retriever

    def _snapshots(self) -> SnapshotDir | None:
        """Where this machine keeps the mirror's snapshot of this store (None: not kept)."""
        if self.config.search.snapshot_min_rows <= 0:
            return None
        uri = (
            redact(self.uri) if is_remote(self.uri) else str(Path(self.uri).expanduser().resolve())
        )
        return SnapshotDir(snapshot_root(), uri, self.embedder.model_id, self.embedder.dim)

    @property
    def consolidator(self) -> Consolidator:
        self._check_open()
        if self._consolidator is None:
            self._consolidator = Consolidator(self.store, self.embedder, self.config)
        return self._consolidator

    def _let_go(self) -> None:
        """(`Closable`) The snapshot being written finished, then the store, mirror and
        consolidator dropped: with them LanceDB's handles and the snapshot's memory maps, once
        no other Brain (`for_scope`) shares them."""
        retriever = self._retriever
        self._store = self._retriever = self._consolidator = None
        if retriever is not None:
            retriever.corpus.wait_for_snapshot()

    def leave_tail(self) -> None:
        """Once this process committed through this Brain's store, leave the next new process
        a snapshot it reads without LanceDB (`corpus_snapshot.leave_tail`): run as a process
        of its own ends, its command done (`cli.common.OwnProcess`)."""
        if self._closed or self._store is None or not self._store.committed:
            return
        corpus_snapshot.leave_tail(self.retriever.corpus)

    @property
    def sight(self) -> Sight:
        """What this Brain reads: its scope's memories and global ones, of its role and of none
        (every role's when it has none)."""
        return Sight(self.scope, self.role)

    def for_scope(
        self: _B,
        scope: str,
        *,
        workdir: Path | None = None,
        session_id: str | None = None,
        role: str | None = None,
    ) -> _B:
        """A Brain for another scope (and `role`, this one's when None) sharing this one's
        config, embedder, store and index.

        The store and the retriever take the scope per call, so one process (the MCP server)
        can serve many scopes from one LanceDB connection and one in-memory corpus.
        """
        other = type(self)(
            scope,
            config=self.config,
            embedder=self.embedder,
            uri=self.uri,
            workdir=workdir,
            session_id=self.session_id if session_id is None else session_id,
            role=self.role if role is None else role,
        )
        other._store, other._retriever = self.store, self.retriever
        other._consolidator = self._consolidator
        return other

    def warm_up(self) -> None:
        """Load the model and open the store and its mirror now rather than on first use (the
        model on its own thread meanwhile, `Embedder.prepare`)."""
        self.embedder.prepare()
        self.retriever.corpus.refresh()
        self.embedder.embed_query("warm up")

    def _write_scope(self, global_: bool) -> str:
        return "" if global_ else self.scope

    def _text(self, field: str, value: object, bounds: tuple[int, int]) -> str:
        """A checked text field after the `memory.secrets` policy (refuse, redact or allow)."""
        text = check_text(field, value, bounds)
        if bounds[0] > 0:
            check_visible(field, text)
        text = screen(field, text, self.config.memory.secrets)
        return check_text(field, text, bounds)  # a redaction can change the length

    def _each(self, field: str, values: list[str]) -> list[str]:
        """A checked list field after the `memory.secrets` policy."""
        return screen_each(field, values, self.config.memory.secrets)

    def _require_visible(self, ids: Sequence[str], field: str) -> dict[str, Memory]:
        found = self.store.get_many(list(ids), self.sight)
        for i, mid in enumerate(ids):
            if mid not in found:
                raise InvalidInput(
                    f"{field}[{i}].target_id", f"no memory {mid} is visible from this scope"
                )
        return found

    def resolve_id(self, memory_id: object, field_name: str = "memory_id") -> str:
        """The full id meant by `memory_id`: a full UUID as it is, or the one memory visible
        from this scope whose id starts with the given prefix (at least 8 hex digits). No
        match is `NotFound`; several are an error listing them."""
        value, full = check_id_ref(memory_id, field_name=field_name)
        if full:
            return value
        found = self.store.ids_with_prefix(value, self.sight, MAX_PREFIX_CANDIDATES + 1)
        return self.one_candidate(value, found, field_name)

    def one_candidate(self, prefix: str, found: list[tuple[str, str]], field_name: str) -> str:
        """The one id among `found` (`(id, shown title)` of the memories whose ids start with
        `prefix`), else `NotFound` or an error listing them."""
        if not found:
            raise NotFound(
                field_name,
                f"no memory id starting with {prefix} is visible from scope "
                f"{scope_named(self.scope)}",
            )
        if len(found) > 1:
            shown = "; ".join(f"{mid} {title}" for mid, title in found[:MAX_PREFIX_CANDIDATES])
            count = (
                f"more than {MAX_PREFIX_CANDIDATES}"
                if len(found) > MAX_PREFIX_CANDIDATES
                else str(len(found))
            )
            raise InvalidInput(
                field_name,
                f"{prefix} is ambiguous, {count} memories start with it: {shown}; give more digits",
            )
        return found[0][0]

    def get(self, memory_id: str, field_name: str = "memory_id", *, checked: bool = True) -> Memory:
        """A memory visible from this scope, by full id or unique prefix (`checked`:
        `schema.row_to_memory`)."""
        memory_id = self.resolve_id(memory_id, field_name)
        return self.store.get(memory_id, self.sight, field_name, checked=checked)
