"""Moving memories in: JSONL import of what `export.export_jsonl` writes, and re-embedding a
store with another model.

Import keeps every field (ids, scopes, times, access counts), skips ids the store already has
(so importing twice is harmless) and reuses the file's embeddings only when they come from the
same model. The whole file is checked before anything is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from octobrain.errors import InvalidInput, StorageError
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.lines import stream_lines
from octobrain.memory import sweep
from octobrain.memory.brain import Brain
from octobrain.memory.export import BATCH, FORMAT, Progress, no_progress
from octobrain.memory.import_rows import (
    ROW_KINDS,
    embedding,
    end_row,
    header_row,
    journal_record,
    memory_row,
    relationship_row,
    screened,
)
from octobrain.memory.import_whole import Agreement
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.scope import GLOBAL_SCOPE
from octobrain.secrets import screen
from octobrain.store import import_marks, schema
from octobrain.store.consolidations import ConsolidationLog, ConsolidationRecord
from octobrain.store.failures import WriteFailed
from octobrain.store.memories import MemoryStore, Pinned
from octobrain.store.schema import DONE, MEMORIES, PENDING, REVERTING, SETTLED
from octobrain.store.sql import sql_in
from octobrain.times import utcnow

READ_VERSIONS = (1, 2)
LINE_BYTES = 16 << 20  # an import line longer than this is refused without being held


@dataclass(frozen=True)
class ImportReport:
    """What an import did."""

    imported: int
    skipped_existing: int
    relationships: int
    reembedded: int
    consolidations: int = 0  # consolidation records stored
    consolidations_not_brought: int = 0  # records naming memories this import did not write
    # new edges with an end the store lacks, or two projects, or a consolidation's without its
    # record
    relationships_not_stored: int = 0
    scopes: dict[str, int] = field(default_factory=dict)  # memories written, by their scope


def file_lines(handle: IO[bytes], name: str = "the import file") -> Iterator[bytes]:
    """The lines of an import file, read one at a time (ended by "\n", "\r\n" or "\r":
    `lines`); a line over `LINE_BYTES` (no line of an export comes near it) is refused by its
    number before it is held, and a read that fails (`/proc/self/mem`: EIO) is
    `InvalidInput("source")` naming `name`."""
    try:
        for number, line in enumerate(stream_lines(handle, LINE_BYTES), 1):
            if line is None:
                raise InvalidInput(f"line {number}", f"must be at most {LINE_BYTES:,} bytes long")
            yield line
    except OSError as exc:
        raise InvalidInput("source", f"cannot read {name}: {exc.strerror or exc}") from None


def _lines(
    source: Iterable[str | bytes], checked: Progress = no_progress
) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(source, 1):
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"line {number}", f"is not UTF-8 text (byte {exc.start + 1} is not)"
            ) from None
        if number == 1:  # (a byte order mark, as editors on Windows save UTF-8, is no text)
            text = text.removeprefix("\ufeff")
        if text.strip():
            try:
                obj = read_json(text)
            except UnreadableJSON as exc:
                raise InvalidInput(f"line {number}", exc.reason) from None
            if not isinstance(obj, dict):
                raise InvalidInput(f"line {number}", "must be a JSON object")
            yield number, obj
        # Counted once the caller has checked it too: a file refused at its first line shows
        # no progress before the error.
        checked(len(line))


def import_jsonl(
    brain: Brain, source: Iterable[str | bytes], *, progress: Progress = no_progress
) -> ImportReport:
    """Check the whole file first (nothing is written if any line is bad), then import
    (`check_import`, then `write_import`)."""
    with tempfile.TemporaryFile(prefix="octobrain-import-") as spool:
        return write_import(brain, check_import(brain, source, spool), progress=progress)


class Spool:
    """Checked rows waiting in a private temporary file, pickled in batches of `BATCH` per
    kind (memory, relationship, consolidation), with where each batch starts: a file of any
    size is checked, then written, without being held."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.count: dict[str, int] = dict.fromkeys(_KINDS, 0)
        self._at: dict[str, list[int]] = {k: [] for k in _KINDS}
        self._pending: dict[str, list[Any]] = {k: [] for k in _KINDS}

    def add(self, kind: str, item: Any) -> None:
        self._pending[kind].append(item)
        self.count[kind] += 1
        if len(self._pending[kind]) == BATCH:
            self._dump(kind)

    def close(self) -> None:
        for kind in _KINDS:
            if self._pending[kind]:
                self._dump(kind)
        self._write(self.file.flush)

    def batches(self, kind: str) -> Iterator[list[Any]]:
        for offset in self._at[kind]:
            self.file.seek(offset)
            yield pickle.load(self.file)

    def _dump(self, kind: str) -> None:
        self._at[kind].append(self.file.tell())
        batch, self._pending[kind] = self._pending[kind], []
        self._write(lambda: pickle.dump(batch, self.file, protocol=pickle.HIGHEST_PROTOCOL))

    @staticmethod
    def _write(step: Callable[[], object]) -> None:
        try:
            step()
        except OSError as exc:  # a full or read-only temporary directory
            raise StorageError(
                f"import: cannot write its temporary file in {tempfile.gettempdir()} "
                f"({exc.strerror or exc}); nothing was imported (TMPDIR chooses another)"
            ) from None


_KINDS = ROW_KINDS


@dataclass(frozen=True)
class Checked:
    """A checked import file: its header and its rows, waiting in `spool`; `named`: the
    memory and edge ids its consolidation records name; `recorded`: for each edge id a record
    not settled names, the status and memories (parent first, then members) of each record
    naming it; `key`: a digest of its row ids, which names the file's import on the store
    (`import_marks`)."""

    header: dict[str, Any]
    spool: Spool
    named: frozenset[str]
    recorded: dict[str, list[tuple[str, tuple[str, ...]]]]
    key: str = ""

    @property
    def count(self) -> int:
        """How many memories the file holds."""
        return self.spool.count["memory"]


def check_import(
    brain: Brain,
    source: Iterable[str | bytes],
    spool: IO[bytes],
    *,
    checked: Progress = no_progress,
) -> Checked:
    """Read every line of `source` once and check it, raising `InvalidInput` naming the first
    bad line and field. The rows are kept in `spool` (a private temporary file). `checked` is
    told each line's length."""
    header: dict[str, Any] | None = None
    dim: int | None = None  # the length the header gives the file's vectors
    rows = Spool(spool)
    named: set[str] = set()
    recorded: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    kept: dict[str, tuple[str, str, int]] = {}  # a consolidation edge's id -> its ends, line
    policy = brain.config.memory.secrets  # imported rows are screened like memorized ones
    seen: dict[tuple[str, str], int] = {}  # (kind, id) -> the line that gave it
    digest = hashlib.sha256()

    def once(kind: str, ident: str, number: int) -> None:
        digest.update(f"{kind} {ident}\n".encode())
        first = seen.setdefault((kind, ident), number)
        if first != number:  # two rows of one id would both be stored, and edited as one
            raise InvalidInput(f"line {number}.id", f"repeats the {kind} id of line {first}")

    end: dict[str, int] | None = None
    header_line = 0
    agreement = Agreement({})  # (the header's, once read: no row comes before it)
    for number, obj in _lines(source, checked):
        kind = obj.get("kind")
        if end is not None:
            raise InvalidInput(f"line {number}", "follows the file's end line")
        # One header, first: a second one (two files joined) changed the vectors' model and
        # dim for the rows after it, and rows before it had their vectors checked by none.
        if header_line and kind == "header":
            raise InvalidInput(
                f"line {number}", f"is a second header line (the first is line {header_line})"
            )
        if not header_line and kind in (*_KINDS, "end"):  # (an unknown kind is named below)
            raise InvalidInput(f"line {number}", f"comes before the file's {FORMAT} header line")
        if kind == "header":
            header_line = number
            if obj.get("format") != FORMAT or obj.get("version") not in READ_VERSIONS:
                versions = " or ".join(f"v{v}" for v in READ_VERSIONS)
                raise InvalidInput(f"line {number}", f"not an {FORMAT} {versions} file")
            header = header_row(obj, f"line {number}")
            dim = header.get("dim")
            agreement = Agreement(header)
        elif kind == "memory":
            try:
                parsed = memory_row(obj, f"line {number}")
            except InvalidInput as exc:  # (the list and source checks name the field alone)
                if exc.field.startswith("line "):
                    raise
                raise InvalidInput(f"line {number}.{exc.field}", exc.rule) from None
            once("memory", parsed.id, number)
            agreement.memory(parsed, number)
            vector = embedding(f"line {number}.embedding", obj.get("embedding"), dim)
            memory = screened(parsed, policy, f"line {number}")
            # A redacted row's stored vector embeds the secret: embed it afresh.
            rows.add("memory", (memory, vector if memory == parsed else None))
        elif kind == "relationship":
            rel = relationship_row(obj, f"line {number}")
            once("relationship", rel.id, number)
            agreement.link(rel, number)
            if rel.relationship_type in KEPT_BY_RECORDS:
                kept[rel.id] = (rel.source_id, rel.target_id, number)
            text = screen(f"line {number}.description", rel.description, policy)
            rows.add("relationship", dataclasses.replace(rel, description=text))
        elif kind == "consolidation":
            record = journal_record(obj.get("record"), f"line {number}.record")
            once("consolidation", record.id, number)
            agreement.record(record, number)
            named.update([record.parent_id, *record.member_ids, *record.edge_ids])
            ids = (record.parent_id, *record.member_ids)  # (one tuple shared by its edges)
            # (an undone or rolled back record's edges are gone: it accounts for none)
            for edge in () if record.status in SETTLED else record.edge_ids:
                recorded.setdefault(edge, []).append((record.status, ids))
            rows.add("consolidation", record)
        elif kind == "end":
            end = end_row(obj, f"line {number}")
        else:
            raise InvalidInput(
                f"line {number}.kind", "must be header, memory, relationship, consolidation or end"
            )
    if header is None:
        raise InvalidInput("file", f"has no {FORMAT} header line")
    agreement.check(end, rows.count)
    for ident, (source, target, number) in kept.items():
        if not any(_joins(ids, source, target) for _, ids in recorded.get(ident, ())):
            raise InvalidInput(
                f"line {number}.relationship_type",
                f"{RelationshipType.CONSOLIDATED_FROM.value!r} edges are written by octobrain "
                "itself: one is imported only with the consolidation record that names it (in "
                "its edge_ids, from its parent to one of its members), which this file lacks",
            )
    rows.close()
    return Checked(header, rows, frozenset(named), recorded, digest.hexdigest()[:32])


# The edges a consolidation record accounts for (its undo removes them): made by hand, one would
# lift an unrelated memory as a consolidated member, and nothing could remove it.
KEPT_BY_RECORDS = frozenset({RelationshipType.CONSOLIDATED_FROM})


def _joins(ids: tuple[str, ...], source: str, target: str) -> bool:
    """Whether an edge from `source` to `target` joins a record's parent (`ids[0]`) to one of
    its members (the rest)."""
    return source == ids[0] and target != source and target in ids


def write_import(
    brain: Brain,
    checked: Checked,
    *,
    progress: Progress = no_progress,
    name: str = "the file",
) -> ImportReport:
    """Store the checked memories batch by batch (those whose id the store has are skipped),
    then the edges between memories the store holds (those whose id or link it has are
    skipped), then the consolidation records whose memories and edges this import wrote.
    `progress` is told of each batch of memories.

    A record names memories and edges that a sleep pass or an undo will change or delete, so
    one that names any the store held before (or that the file does not hold) is not stored:
    a file cannot reach, through its journal, what it did not bring. What a run of the same
    file cut short wrote counts as this import's (`import_marks`: the store records an import
    until it ends), so running it again finishes it, records included."""
    store = brain.store
    mark, again = import_marks.begin(store, checked.key, name, checked.count)
    same_model = (
        checked.header.get("embedding_model") == brain.embedder.model_id
        and checked.header.get("dim") == brain.embedder.dim
    )
    # ids of this import's memories and edges that records name (a cut-short run's included)
    wrote = import_marks.written_before(store, mark, sorted(checked.named)) if again else set()
    imported = reembedded = 0
    scopes: Counter[str] = Counter()
    keys: dict[str, list[sweep.Key]] = {}  # the oldest and newest row imported, per scope
    edges = dropped = records = skipped = 0
    try:
        for batch in checked.spool.batches("memory"):
            fresh = _absent(store, batch)
            if fresh:
                reuse = same_model and all(
                    e is not None and len(e) == brain.embedder.dim for _, e in fresh
                )
                if reuse:
                    vectors = np.stack([e for _, e in fresh if e is not None])
                else:
                    vectors = brain.embedder.embed_documents([m.embedded_text() for m, _ in fresh])
                # Checked again under the write lock (the embedding is done before it), so two
                # processes importing one file store each memory once.
                with store.write_lock():
                    still = {m.id for m, _ in _absent(store, fresh)}
                    keep = [i for i, (m, _) in enumerate(fresh) if m.id in still]
                    if keep:
                        store.add([fresh[i][0] for i in keep], vectors[keep])
                imported += len(keep)
                scopes.update(fresh[i][0].scope for i in keep)
                for i in keep:
                    m = fresh[i][0]
                    key = sweep.key_of({"created_at": m.created_at, "id": m.id})
                    span = keys.setdefault(m.scope, [key, key])
                    span[:] = [min(span[0], key), max(span[1], key)]
                reembedded += 0 if reuse else len(keep)
                wrote.update(fresh[i][0].id for i in keep if fresh[i][0].id in checked.named)
            progress(len(batch))
        # Rows with times a sleep pass has passed are still for its conflict check to reach.
        floor = sweep.floor_of(utcnow() - timedelta(days=brain.config.consolidation.max_age_days))
        for scope, (low, high) in keys.items():
            sweep.reopen(store.location, scope, low, high, floor)
        for rels in checked.spool.batches("relationship"):
            # The edges and memories present are read where edges are added.
            with store.write_lock():
                end_ids = {r.source_id for r in rels} | {r.target_id for r in rels}
                ends = store.scopes_of(sorted(end_ids))
                have = store.held_relationships([r.id for r in rels])
                # A link held under another edge id (or named twice in the file) is held.
                linked = store.links_held(rels)
                unheld = []
                for r in rels:
                    link = (r.source_id, r.target_id, r.relationship_type.value)
                    if r.id not in have and link not in linked:
                        linked.add(link)
                        unheld.append(r)
                gone = _members_gone(store, unheld, checked, wrote)
                new = [
                    r
                    for r in unheld
                    if _within_one_project(r, ends) and _recorded(r, checked, wrote, gone)
                ]
                store.add_relationships(new)
            edges += len(new)
            dropped += len(unheld) - len(new)
            wrote.update(r.id for r in new if r.id in checked.named)
        for journal in checked.spool.batches("consolidation"):
            with store.write_lock():
                log = ConsolidationLog(store)
                have = {r.id for r in log.find(sql_in("id", [r.id for r in journal]))}
                new_records = [r for r in journal if r.id not in have]
                gone = _gone(store, new_records, wrote)
                new_records = [r for r in new_records if _brought(r, wrote, gone)]
                if new_records:
                    log.add(*new_records)
            records += len(new_records)
            skipped += sum(r.id not in have for r in journal) - len(new_records)
    except WriteFailed as failed:
        if not (imported or edges or records):
            raise
        # Each batch is a commit of its own: the store keeps what was imported before.
        done = (
            f"{imported} of {checked.spool.count['memory']} memories, {edges} edges and "
            f"{records} consolidation records were imported before it (running the same import "
            "again finishes it)"
        )
        raise failed.after(done) from failed
    import_marks.finish(store, mark)
    return ImportReport(
        imported,
        checked.count - imported,
        edges,
        reembedded,
        records,
        skipped,
        dropped,
        dict(scopes.most_common()),
    )


def _within_one_project(rel: Relationship, ends: dict[str, str]) -> bool:
    """Whether the store holds both ends of `rel` and the edge stays within one project (its
    own scope and its ends' are that project's or global), as every edge `relate` and the
    store's own passes make; an edge joining two projects would hand one project's memories
    to the other's graph."""
    if rel.source_id not in ends or rel.target_id not in ends:
        return False
    return len({rel.scope, ends[rel.source_id], ends[rel.target_id]} - {GLOBAL_SCOPE}) <= 1


def _members_gone(
    store: MemoryStore, rels: list[Relationship], checked: Checked, wrote: set[str]
) -> set[str]:
    """The memories the records naming `rels` (those `KEPT_BY_RECORDS`) name that the store
    does not hold."""
    ids = {
        i
        for rel in rels
        if rel.relationship_type in KEPT_BY_RECORDS
        for _, named in checked.recorded.get(rel.id, ())
        for i in named
    } - wrote
    return ids - store.held(sorted(ids))


def _recorded(rel: Relationship, checked: Checked, wrote: set[str], gone: set[str]) -> bool:
    """Whether `rel` is an edge octobrain keeps for a consolidation record (`KEPT_BY_RECORDS`)
    only when a record naming it is stored by this import too (`_brought`): it wrote the
    record's parent and every member (of one in force, every member the store holds: `gone`
    are those it holds nowhere). Otherwise the edge would stand without the record that undoes
    it (a file bringing a consolidation of memories the store holds unconsolidated)."""
    if rel.relationship_type not in KEPT_BY_RECORDS:
        return True
    return any(
        ids[0] in wrote and all(i in wrote or (status == DONE and i in gone) for i in ids[1:])
        for status, ids in checked.recorded.get(rel.id, ())
    )


UNFINISHED_STATUSES = (PENDING, REVERTING)


def _gone(store: MemoryStore, records: list[ConsolidationRecord], wrote: set[str]) -> set[str]:
    """The memory and edge ids `records` name that the store does not hold (this import's
    rows written): a member forgotten since its merge, with its edge; an undone merge's
    edges and synthesised parent."""
    memories = {i for r in records for i in (r.parent_id, *r.member_ids)} - wrote
    edges = {i for r in records for i in r.edge_ids} - wrote
    return (memories - store.held(sorted(memories))) | (
        edges - store.held_relationships(sorted(edges))
    )


def _brought(record: ConsolidationRecord, wrote: set[str], gone: set[str]) -> bool:
    """Whether this import wrote every memory and edge `record` names. A record in force or
    settled (undone, rolled back: what keeps a sleep pass from merging again what the user
    undid) may also name ones the store holds nowhere (`gone`), which the source had forgotten
    or undone; its parent in force, never. A record left half-way is finished or undone by the
    next pass: every id it names is this import's."""
    named = (record.parent_id, *record.member_ids, *record.edge_ids)
    if record.status in UNFINISHED_STATUSES:
        return all(i in wrote for i in named)
    if record.status == DONE and record.parent_id not in wrote:
        return False
    return all(i in wrote or i in gone for i in named)


def _absent(
    store: MemoryStore, batch: list[tuple[Memory, npt.NDArray[np.float32] | None]]
) -> list[tuple[Memory, npt.NDArray[np.float32] | None]]:
    """The entries of `batch` whose id the store does not hold."""
    held = store.held([m.id for m, _ in batch])
    return [(m, e) for m, e in batch if m.id not in held]


def reembed(brain: Brain, *, progress: Progress = no_progress) -> int:
    """Re-embed every memory with the brain's configured model, in one atomic commit.

    The new table version replaces the old one in a single LanceDB overwrite commit (older
    versions stay on disk until compaction), under the store's write lock: a crash at any point
    leaves either the old store or the new one, never a mix. Returns the number of rows.
    """
    probe = brain.store
    columns = [c for c in schema.memories_schema("", 1).names if c != "embedding"]
    with probe.write_lock(check_model=False):
        table = probe.open_memories_unchecked()
        total = int(table.count_rows())

        def batches() -> Iterator[list[dict[str, Any]]]:
            # Read as the new version is written, a batch at a time: the store is never held.
            for rows in Pinned(table).scan_batches("true", columns=columns, batch_rows=BATCH):
                batch = [schema.row_to_memory(r) for r in rows.to_pylist()]
                vectors = brain.embedder.embed_documents([m.embedded_text() for m in batch])
                yield [schema.memory_to_row(m, v) for m, v in zip(batch, vectors, strict=True)]
                progress(len(batch))

        probe.overwrite_memories(batches())
    return total


__all__ = [
    "MEMORIES",
    "Checked",
    "ImportReport",
    "check_import",
    "file_lines",
    "import_jsonl",
    "reembed",
    "write_import",
]
