"""What one line of an import file may hold: each row kind parsed and checked field by field
(an `InvalidInput` names the line and the field), and a memory screened for secrets like one
`memorize` stores."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.errors import InvalidInput, as_json, cut_middle
from octobrain.field_checks import check_id, check_unit
from octobrain.models import (
    CONTENT_BYTES,
    CONTEXT_BYTES,
    LINK_DESCRIPTION_CHARS,
    TITLE_BYTES,
    Memory,
    Relationship,
    clean_files,
    clean_tags,
    parse_memory_type,
    parse_relationship_type,
    parse_source,
)
from octobrain.models import State as MemoryState
from octobrain.safe_text import check_text
from octobrain.scope import validate_scope
from octobrain.secrets import screen, screen_each
from octobrain.store.consolidations import RECORD_KINDS, ConsolidationRecord
from octobrain.store.link_rules import self_link_rule
from octobrain.store.schema import RECORD_STATUSES
from octobrain.times import earlier_by, iso_time, iso_z, not_ahead

MAX_COUNT = 2**62  # an access count beyond the store's int64 column is no count
SHORT_BYTES = 256  # a row's role or git commit (a commit id is 40 or 64 hex digits)


def journal_record(obj: object, where: str) -> ConsolidationRecord:
    """A consolidation record, every field checked as a memory row's are: an unfinished one
    (pending, reverting) is acted on by the next sleep pass, so nothing in it may be taken on
    trust. Its member lists are one entry per member."""
    if not isinstance(obj, dict):
        raise InvalidInput(where, "must be an object")

    def f(name: str) -> str:
        return f"{where}.{name}"

    _known(obj, _RECORD_FIELDS, where, "consolidation record")
    members = _ids(f("member_ids"), obj.get("member_ids"), least=1)

    def each(name: str, check: Callable[[str, object], Any]) -> list[Any]:
        values = obj.get(name)
        if not isinstance(values, list) or len(values) != len(members):
            raise InvalidInput(f(name), f"must be a list of {len(members)}, one per member")
        return [check(f"{f(name)}[{i}]", v) for i, v in enumerate(values)]

    def optional(name: str, check: Callable[[str, object], Any]) -> Any:
        return None if obj.get(name) is None else check(f(name), obj[name])

    goal = obj.get("goal_id", "")
    return ConsolidationRecord(
        kind=_one_of(f("kind"), obj.get("kind"), RECORD_KINDS),
        scope=_scope(obj, f("scope"), "consolidation's"),
        parent_id=check_id(obj.get("parent_id"), field_name=f("parent_id")),
        parent_synthesised=_flag(f("parent_synthesised"), obj.get("parent_synthesised")),
        member_ids=members,
        member_prev_importance=each("member_prev_importance", check_unit),
        member_prev_pre=each(
            "member_prev_pre", lambda n, v: None if v is None else check_unit(n, v)
        ),
        member_prev_state=each("member_prev_state", _state),
        member_prev_updated_at=each("member_prev_updated_at", _time),
        stamp=_time(f("stamp"), obj.get("stamp")),
        description=_optional_text(f("description"), obj.get("description"), CONTENT_BYTES[1]),
        parent_prev_importance=optional("parent_prev_importance", check_unit),
        parent_prev_updated_at=optional("parent_prev_updated_at", _time),
        goal_id="" if goal == "" else check_id(goal, field_name=f("goal_id")),
        edge_ids=_ids(f("edge_ids"), obj.get("edge_ids", []), least=0),
        status=_one_of(f("status"), obj.get("status"), RECORD_STATUSES),
        id=check_id(obj.get("id"), field_name=f("id")),
        created_at=_time(f("created_at"), obj.get("created_at")),
    )


_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(ConsolidationRecord))


def _ids(field: str, value: object, *, least: int) -> list[str]:
    """A list of distinct ids (canonical form), at least `least` of them."""
    if not isinstance(value, list) or len(value) < least:
        raise InvalidInput(field, f"must be a list of at least {least} ids")
    ids = [check_id(v, field_name=f"{field}[{i}]") for i, v in enumerate(value)]
    if len(set(ids)) != len(ids):
        raise InvalidInput(field, "must not name an id twice")
    return ids


def _one_of(field: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidInput(field, f"must be one of {', '.join(allowed)}, got {as_json(value)}")
    return str(value)


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(field, "must be true or false")
    return value


def _state(field: str, value: object) -> str:
    try:
        return MemoryState(value).value
    except ValueError:
        raise InvalidInput(field, "must be working, consolidated or archived") from None


def _time(field: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise InvalidInput(field, "must be an ISO-8601 timestamp string")
    return iso_time(field, value)


def _optional_text(field: str, value: object, most: int) -> str:
    """An optional text field of an imported row: absent or a string of at most `most` bytes
    (after trimming) without NUL characters, as `check_text` holds `memorize`'s fields to."""
    return "" if value is None else check_text(field, value, (0, most))


_NUMBERS = {int, float}  # the types JSON numbers parse to
UNIT_SLACK = 1e-5  # a float32 unit vector's length is 1 within a few units of 1e-7


MAX_DIM = 8192  # more numbers than any embedding model gives


def embedding(field: str, value: object, dim: int | None = None) -> npt.NDArray[np.float32] | None:
    """A row's stored vector: absent, or a non-empty list of numbers that are finite as float32
    and not all zero, returned at unit length (a vector is compared by its direction: stored
    at another length, its dot products would be no cosines). Checked whether or not it will
    be used: a file is refused for what it holds, not for which model reads it. `dim`: the
    length the file's header gives its vectors (each row's is held until it is written)."""
    if value is None:
        return None
    rule = "must be a list of finite numbers, not all zero"
    if not isinstance(value, list) or not value:
        raise InvalidInput(field, rule)
    if len(value) > MAX_DIM or (dim is not None and len(value) != dim):
        wanted = f"the header's dim, {dim}" if dim is not None else f"at most {MAX_DIM:,}"
        raise InvalidInput(field, f"must hold {wanted} numbers, got {len(value):,}")
    if not set(map(type, value)) <= _NUMBERS:  # (bool is a type of its own)
        raise InvalidInput(field, rule)
    try:
        vector = np.asarray(value, dtype=np.float64)
    except OverflowError:  # an integer beyond any float
        raise InvalidInput(field, rule) from None
    if not np.all(np.isfinite(vector)) or np.max(np.abs(vector)) > np.finfo(np.float32).max:
        raise InvalidInput(field, rule)
    norm = float(np.linalg.norm(vector))
    if not norm > 0.0 or not np.isfinite(norm):
        raise InvalidInput(field, rule)
    if abs(norm - 1.0) <= UNIT_SLACK:  # an exported vector: kept bit for bit
        return np.asarray(vector, dtype=np.float32)
    return np.asarray(vector / norm, dtype=np.float32)


def memory_row(obj: dict[str, Any], where: str) -> Memory:
    def f(name: str) -> str:
        return f"{where}.{name}"

    _known(obj, _MEMORY_FIELDS, where, "memory row")
    pre = obj.get("pre_consolidation_importance")
    context = _optional_text(f("context"), obj.get("context"), CONTEXT_BYTES)
    count = obj.get("access_count", 0)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
        raise InvalidInput(f("access_count"), f"must be an integer in [0, {MAX_COUNT}]")
    state = MemoryState(_state(f("state"), obj.get("state", "working")))
    memory = Memory(
        id=check_id(obj.get("id"), field_name=f("id")),
        scope=_scope(obj, f("scope"), "memory's"),
        role=_optional_text(f("role"), obj.get("role"), SHORT_BYTES),
        memory_type=parse_memory_type(obj.get("memory_type"), field_name=f("memory_type")),
        title=check_text(f("title"), obj.get("title"), TITLE_BYTES),
        # An ingested conversation turn may be as short as "Yes!": its context carries it.
        content=check_text(
            f("content"), obj.get("content"), (1, CONTENT_BYTES[1]) if context else CONTENT_BYTES
        ),
        tags=clean_tags(obj.get("tags")),
        related_files=clean_files(obj.get("related_files")),
        importance=check_unit(f("importance"), obj.get("importance", 0.5)),
        pre_consolidation_importance=None
        if pre is None
        else check_unit(f("pre_consolidation_importance"), pre),
        source=parse_source(obj.get("source")),
        state=state,
        # (a row dated ahead would head `memory recent` and every briefing until then)
        created_at=not_ahead(f("created_at"), _time(f("created_at"), obj.get("created_at"))),
        updated_at=not_ahead(f("updated_at"), _time(f("updated_at"), obj.get("updated_at"))),
        last_accessed=not_ahead(
            f("last_accessed"), _time(f("last_accessed"), obj.get("last_accessed"))
        ),
        access_count=count,
        git_commit=_optional_text(f("git_commit"), obj.get("git_commit"), SHORT_BYTES),
        context=context,
    )
    # (`earlier_by`: a row made in the first day of year 1 has no day before it). A last access
    # long before the row was made (an edited file) was kept: the memory ranked as one unused
    # for that long, at the decay floor.
    for name, done in (("updated_at", "edited"), ("last_accessed", "recalled")):
        when = getattr(memory, name)
        if when < earlier_by(memory.created_at, EDITED_BEFORE_MADE):
            raise InvalidInput(
                f(name),
                f"must not be more than a day earlier than created_at "
                f"({iso_z(memory.created_at)}), got {iso_z(when)}: a memory is not "
                f"{done} before it is made",
            )
    return memory


# How much earlier than its creation a row's last edit or access may be: `memory ingest` dates
# a turn by when it was said, up to a day ahead of the clock (`times.not_ahead`), and stamps its
# edit and access with the ingest's time.
EDITED_BEFORE_MADE = timedelta(days=1)


def _scope(obj: dict[str, Any], field: str, whose: str) -> str:
    """A row's `scope`, which it must give: read as global when left out, a project's row
    reached every project though the header named the project."""
    if "scope" not in obj:
        raise InvalidInput(field, f'required: the {whose} project, or "" for global')
    return validate_scope(obj["scope"], field=field)


# What an export writes on a row's line (every version: its fields are the record's), so a
# misspelt field is refused rather than read as absent, its value lost to the default.
_MEMORY_FIELDS = frozenset({"kind", "embedding", *(f.name for f in dataclasses.fields(Memory))})
_LINK_FIELDS = frozenset({"kind", *(f.name for f in dataclasses.fields(Relationship))})


def _known(obj: dict[str, Any], known: frozenset[str], where: str, what: str) -> None:
    """Refuse the first (by name) field of `obj` that is not `known`: a name that is no plain
    word is quoted as JSON, cut to a line (it may hold control characters, or a megabyte)."""
    unknown = sorted(set(obj) - known)
    if unknown:
        name = unknown[0]
        shown = name if name.isidentifier() else json.dumps(cut_middle(name, NAME_CHARS))
        article = "an" if what[0] in "aeiou" else "a"
        raise InvalidInput(f"{where}.{shown}", f"unknown field of {article} {what}")


NAME_CHARS = 80  # an unknown field's name as an error shows it


def header_row(obj: dict[str, Any], where: str) -> dict[str, Any]:
    """An export's header line (its format and version checked by the caller): every field it
    gives typed as an export writes it (`dim`, read as absent when it was no number, let
    every vector length through), and none it does not know."""
    _known(obj, _HEADER_FIELDS, where, "header line")
    if "count" in obj:
        _whole(f"{where}.count", obj["count"])
    dim = obj.get("dim")
    if "dim" in obj and (
        isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= MAX_DIM
    ):
        raise InvalidInput(f"{where}.dim", f"must be an integer in [1, {MAX_DIM}]")
    model = obj.get("embedding_model")
    if "embedding_model" in obj and (
        not isinstance(model, str) or not 0 < len(model) <= SHORT_BYTES
    ):
        raise InvalidInput(
            f"{where}.embedding_model", f"must be a model name of 1–{SHORT_BYTES} characters"
        )
    if "scope" in obj:
        validate_scope(obj["scope"], field=f"{where}.scope")
    return obj


def end_row(obj: dict[str, Any], where: str) -> dict[str, int]:
    """An export's end line: how many lines of each kind the file holds."""
    _known(obj, _END_FIELDS, where, "end line")
    return {kind: _whole(f"{where}.{kind}", obj.get(kind)) for kind in ROW_KINDS}


ROW_KINDS = ("memory", "relationship", "consolidation")
_HEADER_FIELDS = frozenset(
    {"kind", "format", "version", "embedding_model", "dim", "scope", "count"}
)
_END_FIELDS = frozenset({"kind", *ROW_KINDS})


def _whole(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(field, "must be a whole number >= 0")
    return value


def screened(memory: Memory, policy: str, where: str) -> Memory:
    """`memory` after the `memory.secrets` policy on every text field it stores."""
    return dataclasses.replace(
        memory,
        title=screen(f"{where}.title", memory.title, policy),
        content=screen(f"{where}.content", memory.content, policy),
        tags=screen_each(f"{where}.tags", memory.tags, policy),
        related_files=screen_each(f"{where}.related_files", memory.related_files, policy),
        context=screen(f"{where}.context", memory.context, policy),
        role=screen(f"{where}.role", memory.role, policy),
        git_commit=screen(f"{where}.git_commit", memory.git_commit, policy),
    )


def relationship_row(obj: dict[str, Any], where: str) -> Relationship:
    _known(obj, _LINK_FIELDS, where, "relationship row")
    source = check_id(obj.get("source_id"), field_name=f"{where}.source_id")
    target = check_id(obj.get("target_id"), field_name=f"{where}.target_id")
    if source == target:  # (as `relate` refuses it: a memory linked to itself)
        raise InvalidInput(f"{where}.target_id", self_link_rule(source))
    return Relationship(
        id=check_id(obj.get("id"), field_name=f"{where}.id"),
        source_id=source,
        target_id=target,
        relationship_type=parse_relationship_type(
            obj.get("relationship_type", ""), field_name=f"{where}.relationship_type"
        ),
        strength=check_unit(f"{where}.strength", obj.get("strength", 0.8)),
        description=_optional_text(
            f"{where}.description", obj.get("description"), LINK_DESCRIPTION_CHARS * 4
        ),
        scope=_scope(obj, f"{where}.scope", "link's"),
        created_at=not_ahead(
            f"{where}.created_at", _time(f"{where}.created_at", obj.get("created_at"))
        ),
    )
