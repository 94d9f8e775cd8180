"""What `octobrain doctor` reports (`doctor.diagnose`): each problem found, what was read
from each table, and the whole diagnosis."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the store."""

    table: str
    problem: str
    repair: str
    # False for what no reader sees (edges to memories that are gone): named, repaired, but
    # not damage that stops a migrate or explains a failed command.
    damage: bool = True

    def line(self) -> str:
        return f"{self.table}: {self.problem}; repair: {self.repair}"


@dataclass
class TableCheck:
    """What was read from one table."""

    name: str
    in_manifest: bool
    opened: bool = False
    rows_counted: int | None = None  # what the table's metadata says
    rows_read: int = 0  # what reading every fragment gave
    damaged_fragments: list[int] = field(default_factory=list)
    unread: tuple[int, int] | None = None  # fragments [lo, hi) left unread (too much damage)
    # Rows read whose embedding is not unit length (`unit_vectors.unsound`), the first of them
    # (its id) and that one's length.
    unsound_vectors: int = 0
    first_unsound: tuple[str, float] | None = None
    # Memories, edges, chunks or sources that no longer match the checksum written with them
    # (`schema.verified`, `edge_verified`, `chunk_verified`, `source_verified`), and the first
    # `doctor_tables._NAMED_GARBLED` of them (their ids as they read now; of knowledge, their
    # sources).
    garbled_rows: int = 0
    garbled: list[str] = field(default_factory=list)
    # Of the chunks (several to a source): every source the damaged ones are of (as a count
    # in the JSON report), so that the problem says how many more than those named there are.
    garbled_of: set[str] = field(default_factory=set)
    # Deletion files the table's version reads with no checksum recorded (`deletion_sums`):
    # written by an older octobrain, or by a write killed before it recorded them. Not checked.
    unchecked_deletions: int = 0


@dataclass
class Diagnosis:
    """The whole report: `ok` when nothing is wrong."""

    store: str
    manifest: str  # "ok" | "absent" | the reason it cannot be read
    tables: list[TableCheck]
    problems: list[Problem]
    # Consolidations a killed process left half-way (pending or reverting records): no reader
    # sees them half-done, and the next consolidation finishes or undoes each. Not a problem.
    unfinished_consolidations: int = 0
    dangling_edges: int = 0  # edges to memories that are gone (`store.dangling`); a problem
    orphan_chunks: int = 0  # chunks no source row names (`store.orphan_chunks`); a problem
    # Edges from a memory to itself (`store.self_links`), and the first of those memories
    # (`self_links.NAMED`, as the problem names them); a problem.
    self_links: int = 0
    self_linked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "ok": self.ok,
            "manifest": self.manifest,
            "tables": [asdict(t) | {"garbled_of": len(t.garbled_of)} for t in self.tables],
            "problems": [asdict(p) for p in self.problems],
            "unfinished_consolidations": self.unfinished_consolidations,
            "dangling_edges": self.dangling_edges,
            "orphan_chunks": self.orphan_chunks,
            "self_links": self.self_links,
            "self_linked": self.self_linked,
        }
