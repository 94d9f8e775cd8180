"""Checking a JSONL import file (what `export.export_jsonl` writes) before anything is
written: its lines read one at a time, each row checked (its fields, its id once, the header's
counts and model, a consolidation edge only with its record), and the checked rows spooled to a
private temporary file for `transfer.write_import`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator, Set
from dataclasses import dataclass
from typing import IO, Any

from octobrain.errors import InvalidInput, StorageError, as_json
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.lines import stream_lines
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
from octobrain.models import RelationshipType
from octobrain.secrets import screen
from octobrain.store.schema import SETTLED

READ_VERSIONS = (1, 2)
LINE_BYTES = 16 << 20  # an import line longer than this is refused without being held


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
    lines = iter(source)
    for number, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"line {number}", f"is not UTF-8 text (byte {exc.start + 1} is not)"
            ) from None
        if number == 1:  # (a byte order mark, as editors on Windows save UTF-8, is no text)
            text = text.removeprefix("\ufeff")
            if text.lstrip().startswith("["):
                raise _an_array(text, lines)
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


ARRAY_PEEK_BYTES = 1 << 20  # read of a JSON array to tell what its first element is
_JSONL = (
    "import reads an octobrain export: JSON Lines, one JSON object per line, as `octobrain "
    "memory export` writes them (a header line, then a line per memory and per link)"
)


def _an_array(first: str, rest: Iterator[str | bytes]) -> InvalidInput:
    """The error for a file that opens a JSON array (`[…]`, what other tools export): what
    import reads instead, and, when the array's first element is an export's header or a
    memory, how to write the array as an import file."""
    text, size = first.lstrip()[1:], len(first)
    for line in rest:
        if size > ARRAY_PEEK_BYTES:
            break
        piece = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        text, size = text + piece, size + len(piece)
    try:
        item = json.JSONDecoder().raw_decode(text.lstrip())[0]
    except (ValueError, RecursionError):
        item = None
    kind = item.get("kind") if isinstance(item, dict) else None
    if kind == "header":
        what, how = "an export's lines", "write each element on a line of its own"
    elif kind == "memory" or (isinstance(item, dict) and {"title", "content"} <= item.keys()):
        what = "memory objects"
        how = (
            'write each object on a line of its own, with "kind": "memory", after a header '
            'line {"kind": "header", "format": "octobrain-export", "version": 1}'
        )
    else:
        return InvalidInput("line 1", f"starts a JSON array; {_JSONL}")
    return InvalidInput("line 1", f"starts a JSON array of {what}; {_JSONL}: {how}")


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
    given: str = "",
) -> Checked:
    """Read every line of `source` once and check it, raising `InvalidInput` naming the first
    bad line and field. The rows are kept in `spool` (a private temporary file). `checked` is
    told each line's length. `given`: how the caller chose `brain`'s scope for the import
    (`--scope S`, `--global`; "" when it did not, as a scope derived from the cwd), which a
    file holding another project's memories refuses (`into_its_own_scopes`)."""
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
            agreement = Agreement(header, brain.role)
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
                f"{as_json(RelationshipType.CONSOLIDATED_FROM.value)} edges are written by "
                "octobrain itself: one is imported only with the consolidation record that names "
                "it (in its edge_ids, from its parent to one of its members), which this file "
                "lacks",
            )
    rows.close()
    into_its_own_scopes(given, brain.scope, agreement.projects)
    return Checked(header, rows, frozenset(named), recorded, digest.hexdigest()[:32])


def into_its_own_scopes(given: str, scope: str, projects: Set[str]) -> None:
    """Refuse an import told a scope (`given`: `--scope S` or `--global`, "" when derived from
    the cwd) other than the project scopes its memories are of: they would be written in
    theirs, and not be seen where the import was told to put them."""
    other = sorted(projects - {scope})
    if not given or not other:
        return
    option, _, value = given.partition(" ")
    named = ", ".join(as_json(p) for p in other)
    raise InvalidInput(
        option,
        f"{f'is {as_json(value)}' if value else 'given'}, but the file holds memories of "
        f"{named}: an import keeps each memory's scope and moves none into another project; "
        f"nothing was imported. Leave {option} out to import them as they are (then seen with "
        f"--scope {other[0]})",
    )


# The edges a consolidation record accounts for (its undo removes them): made by hand, one would
# lift an unrelated memory as a consolidated member, and nothing could remove it.
KEPT_BY_RECORDS = frozenset({RelationshipType.CONSOLIDATED_FROM})


def _joins(ids: tuple[str, ...], source: str, target: str) -> bool:
    """Whether an edge from `source` to `target` joins a record's parent (`ids[0]`) to one of
    its members (the rest)."""
    return source == ids[0] and target != source and target in ids
