"""The memory data model: types, trust tiers, states, relationships, and input validation.

Validation lives here, once (with its leaves: `field_checks` for flags, lists, numbers and
ids, `safe_text` for text fields, `times` for times), so the CLI, the MCP server and the
library reject the same inputs with the same message: the field's name and the rule it broke.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from enum import Enum
from typing import Any

from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_list, did_you_mean
from octobrain.safe_text import byte_len, plain_string
from octobrain.times import iso_z, utcnow

TITLE_BYTES = (5, 200)
CONTENT_BYTES = (10, 10_000)
# two bytes: "Go", "S3", "C#", "UI" are real questions (the original refused under three)
QUERY_BYTES = (2, 500)
QUERY_RULE = f"{QUERY_BYTES[0]}–{QUERY_BYTES[1]} bytes"
NOTE_BYTES = 32 * 1024  # one `knowledge store` note: ~30 chunks, seconds of embedding
SOURCE_BYTES = 4096  # longest `knowledge` source argument (a path or URL)
KEY_BYTES = 200  # longest `knowledge store` note key
# longest `knowledge match` pattern: the regex parser holds ~300 bytes a byte of a class
# (`[aaa…]` of 900 kB peaked at 291 MB); a grep pattern is a few hundred bytes
PATTERN_BYTES = 16 * 1024
MAX_TAGS = 10
TAG_CHARS = 50
MAX_FILES = 20
FILE_BYTES = 500
MAX_LINKS = 20
LINK_DESCRIPTION_CHARS = 200
MAX_QUERIES = 5
# A list of types to filter by: each of the ~20 types once, and the aliases, fits well within.
MAX_TYPE_FILTERS = 64
CONTEXT_BYTES = 4_000  # what a conversation turn's indexed context may add to it
# Every write is a store version kept this long: `memory history` / `memory restore` undo.
KEEP_VERSIONS_DAYS = 7


class MemoryType(str, Enum):
    """What kind of knowledge a memory holds. `goal` anchors goal-driven consolidation."""

    CODE = "code"
    ARCHITECTURE = "architecture"
    BUG_FIX = "bug_fix"
    FEATURE = "feature"
    DOCUMENTATION = "documentation"
    USER_PREFERENCE = "user_preference"
    DECISION = "decision"
    LEARNING = "learning"
    CONFIGURATION = "configuration"
    TESTING = "testing"
    PERFORMANCE = "performance"
    SECURITY = "security"
    VALIDATION = "validation"
    RESEARCH = "research"
    WORKFLOW = "workflow"
    REQUIREMENT = "requirement"
    DESIGN = "design"
    INTEGRATION = "integration"
    COMMUNICATION = "communication"
    PROCESS = "process"
    INSIGHT = "insight"
    GOAL = "goal"


_TYPE_ALIASES = {
    "arch": "architecture",
    "bugfix": "bug_fix",
    "bug": "bug_fix",
    "docs": "documentation",
    "doc": "documentation",
    "preference": "user_preference",
    "tutorial": "learning",
    "education": "learning",
    "config": "configuration",
    "setup": "configuration",
    "test": "testing",
    "qa": "testing",
    "perf": "performance",
    "optimization": "performance",
    "vulnerability": "security",
    "vuln": "security",
    "hypothesis": "validation",
    "experiment": "validation",
    "analysis": "research",
    "investigation": "research",
    "sop": "workflow",
    "playbook": "workflow",
    "spec": "requirement",
    "constraint": "requirement",
    "ux": "design",
    "ui": "design",
    "wireframe": "design",
    "api": "integration",
    "connector": "integration",
    "stakeholder": "communication",
    "update": "communication",
    "runbook": "process",
    "procedure": "process",
    "deployment": "process",
    "intent": "goal",
    "task": "goal",
    "objective": "goal",
    "other": "insight",
}


class Source(str, Enum):
    """Trust tier: who vouches for a memory. Ranking multiplies by `trust`."""

    USER_CONFIRMED = "user_confirmed"
    IMPORTED = "imported"
    AGENT_INFERRED = "agent_inferred"
    AUTO_LINKED = "auto_linked"

    @property
    def trust(self) -> float:
        return _TRUST[self]

    @property
    def label(self) -> str:
        return _LABELS[self]


_TRUST = {
    Source.USER_CONFIRMED: 1.0,
    Source.IMPORTED: 0.9,
    Source.AGENT_INFERRED: 0.85,
    Source.AUTO_LINKED: 0.8,
}
_LABELS = {
    Source.USER_CONFIRMED: "[CONFIRMED]",
    Source.IMPORTED: "[IMPORTED]",
    Source.AGENT_INFERRED: "[INFERRED]",
    Source.AUTO_LINKED: "[AUTO]",
}
_SOURCE_ALIASES = {
    "confirmed": "user_confirmed",
    "ground_truth": "user_confirmed",
    "inferred": "agent_inferred",
    "autolinked": "auto_linked",
}


class State(str, Enum):
    """Lifecycle state. Consolidated rows stay searchable with damped importance."""

    WORKING = "working"
    CONSOLIDATED = "consolidated"
    ARCHIVED = "archived"


class RelationshipType(str, Enum):
    """Typed, directed edges between memories (source → target)."""

    RELATED_TO = "related_to"
    DEPENDS_ON = "depends_on"
    SUPERSEDES = "supersedes"
    SIMILAR = "similar"
    CONFLICTS = "conflicts"
    IMPLEMENTS = "implements"
    EXTENDS = "extends"
    ACHIEVES = "achieves"
    CLOSES = "closes"
    AUTO_LINKED = "auto_linked"
    CONSOLIDATED_FROM = "consolidated_from"
    SAME_SESSION = "same_session"  # written in the same agent session (temporal association)


# Edges octobrain writes itself (linking, consolidation, sessions): a caller naming one would
# forge what they mean, e.g. a hand-made `consolidated_from` ranks an unrelated memory first.
RESERVED_LINKS = frozenset(
    {
        RelationshipType.AUTO_LINKED,
        RelationshipType.CONSOLIDATED_FROM,
        RelationshipType.SAME_SESSION,
    }
)
LINK_TYPES = [t.value for t in RelationshipType if t not in RESERVED_LINKS]
# What a caller may remove (`memory unrelate`): its own links, and the original's guesses
# (`auto_linked`, which an import may bring); not a consolidation's edges or a session's order.
UNLINKABLE = [*LINK_TYPES, RelationshipType.AUTO_LINKED.value]


def _choices(enum: type[Enum]) -> str:
    return ", ".join(str(m.value) for m in enum)


def parse_memory_type(
    value: str | MemoryType | None, *, field_name: str = "memory_type"
) -> MemoryType:
    """Parse a memory type, case-insensitively and with upstream's aliases.

    Unlike upstream, an unknown name is an error rather than a silent `insight`: an agent that
    misspells `decision` should learn it, not lose the type.
    """
    if value is None:
        return MemoryType.CODE
    if isinstance(value, MemoryType):
        return value
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    key = _TYPE_ALIASES.get(key, key)
    try:
        return MemoryType(key)
    except ValueError:
        near = did_you_mean(key, [m.value for m in MemoryType], _TYPE_ALIASES)
        raise InvalidInput(
            field_name,
            f"unknown memory type {as_json(value)}{near}; use one of {_choices(MemoryType)}",
        ) from None


def parse_source(value: str | Source | None) -> Source:
    """Parse a trust tier; the default is `agent_inferred`."""
    if value is None:
        return Source.AGENT_INFERRED
    if isinstance(value, Source):
        return value
    key = str(value).strip().lower()
    key = _SOURCE_ALIASES.get(key, key)
    try:
        return Source(key)
    except ValueError:
        raise InvalidInput(
            "source", f"must be one of {_choices(Source)}, got {as_json(value)}"
        ) from None


def parse_relationship_type(
    value: str | RelationshipType, *, field_name: str = "relationship_type"
) -> RelationshipType:
    """Parse a relationship type (exact names, case-insensitive)."""
    if isinstance(value, RelationshipType):
        return value
    key = str(value).strip().lower().replace("-", "_")
    try:
        return RelationshipType(key)
    except ValueError:
        raise InvalidInput(
            field_name,
            f"unknown relationship type {as_json(value)}; use one of {_choices(RelationshipType)}",
        ) from None


def parse_link_type(value: object, *, field_name: str = "relationship_type") -> RelationshipType:
    """A relationship type a caller may give (`LINK_TYPES`: not one octobrain writes itself)."""
    kind = value if isinstance(value, str | RelationshipType) else str(value)
    try:
        parsed = parse_relationship_type(kind, field_name=field_name)
    except InvalidInput:  # (the list offered auto_linked & co., which this then refused)
        raise InvalidInput(
            field_name,
            f"unknown relationship type {as_json(value)}; use one of {', '.join(LINK_TYPES)}",
        ) from None
    if parsed in RESERVED_LINKS:
        raise InvalidInput(
            field_name,
            f"{as_json(parsed.value)} edges are written by octobrain itself; use one of "
            f"{', '.join(LINK_TYPES)}",
        )
    return parsed


def clean_tags(values: Iterable[object] | None, field_name: str = "tags") -> list[str]:
    """Trimmed, de-duplicated tags; each at most 50 characters, at most 10 of them."""
    return _clean_list(
        field_name,
        values,
        MAX_TAGS,
        lambda t: len(t) <= TAG_CHARS,
        f"at most {TAG_CHARS} characters",
    )


def clean_files(values: Iterable[object] | None, field_name: str = "related_files") -> list[str]:
    """Trimmed, de-duplicated file paths; each at most 500 bytes, at most 20 of them."""
    return _clean_list(
        field_name,
        values,
        MAX_FILES,
        lambda f: byte_len(f) <= FILE_BYTES,
        f"at most {FILE_BYTES} bytes",
    )


def _clean_list(
    field_name: str,
    values: Iterable[object] | None,
    cap: int,
    fits: Callable[[str], bool],
    rule: str,
) -> list[str]:
    if values is None:
        return []
    values = check_list(field_name, values)
    out: list[str] = []
    seen: set[str] = set()  # (`in out` made 100,000 distinct tags a minute under the pool lock)
    for i, raw in enumerate(values):
        item = plain_string(f"{field_name}[{i}]", raw)
        if not item or item in seen:
            continue
        if not fits(item):
            raise InvalidInput(f"{field_name}[{i}]", rule)
        seen.add(item)
        out.append(item)
    if len(out) > cap:
        raise InvalidInput(field_name, f"at most {cap} items, got {len(out)}")
    return out


@dataclass
class Memory:
    """One stored memory, as the store reads and writes it."""

    title: str
    content: str
    memory_type: MemoryType = MemoryType.CODE
    scope: str = ""
    role: str = ""
    tags: list[str] = field(default_factory=list)
    related_files: list[str] = field(default_factory=list)
    importance: float = 0.5
    source: Source = Source.AGENT_INFERRED
    state: State = State.WORKING
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    last_accessed: datetime = field(default_factory=utcnow)
    access_count: int = 0
    git_commit: str = ""
    # Importance before a consolidation damped it, so `unconsolidate` can restore it exactly.
    pre_consolidation_importance: float | None = None
    # Indexed but never shown: what a conversation turn needs to keep its meaning. Its first
    # line (who spoke, when) is embedded too; the lines after it (the neighbouring turns) are
    # only BM25-indexed. "" for every other memory.
    context: str = ""

    def searchable_text(self) -> str:
        """The text that is BM25-indexed: title, content, context, tags, files."""
        return self._text(self.context)

    def embedded_text(self) -> str:
        """The text that is embedded: as `searchable_text`, with only the context's first line.

        A turn's neighbours make it findable by words, but in its vector they raised its
        cosine to any question on the topic, so relevance could not tell "nothing was said
        about that" from an answer (README, LoCoMo)."""
        return self._text(self.context.split("\n", 1)[0])

    def _text(self, context: str) -> str:
        return " ".join(
            part
            for part in (
                self.title,
                self.content,
                context,
                " ".join(self.tags),
                " ".join(self.related_files),
            )
            if part
        )


@dataclass(frozen=True)
class Relationship:
    """A directed, typed edge between two memories."""

    source_id: str
    target_id: str
    relationship_type: RelationshipType
    strength: float = 0.8
    description: str = ""
    scope: str = ""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=utcnow)


def to_plain(record: Memory | Relationship, *, iso_times: bool) -> dict[str, Any]:
    """A record's fields as plain values: enums by value, lists copied, and timestamps either
    kept (for Arrow) or as ISO-8601 strings ending in Z (for JSON)."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, list):
            value = list(value)
        elif isinstance(value, datetime) and iso_times:
            value = iso_z(value)
        out[f.name] = value
    return out
