"""The tools' bodies: check the arguments' shapes, call one `Brain` method, format the result.

Nothing here knows about MCP. Field rules (lengths, ranges, enums) are enforced by the facade
and raise `InvalidInput("<field>", "<rule>")`; this module adds only what JSON can get wrong
before the facade sees it (wrong container types, unknown or missing parameters) and the
tool-level rules (which trust tiers and link types an agent may set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from octobrain.errors import InvalidInput, as_json, json_type
from octobrain.field_checks import check_flag
from octobrain.models import LINK_TYPES, MAX_FILES, MAX_TAGS
from octobrain.safe_text import byte_len, client_text, glimpse, one_line
from octobrain.server.schemas import INGEST_BYTES, INGEST_TURNS, KNOWLEDGE_COMMANDS, SOURCES
from octobrain.server.stoppable import unless_stopped

if TYPE_CHECKING:
    import threading

    import numpy as np

    from octobrain.embed.base import Embedder
    from octobrain.knowledge import Knowledge
    from octobrain.memory.brain import Brain
    from octobrain.memory.conversation import Conversation
    from octobrain.models import Memory


@dataclass(frozen=True)
class Reply:
    """A tool's text answer; `error` marks it as an MCP tool error (isError)."""

    text: str
    error: bool = False


def check_arguments(
    arguments: dict[str, Any],
    allowed: frozenset[str],
    owner: str = "this tool",
    shown: frozenset[str] | None = None,
) -> None:
    """Reject parameters the tool (or the briefing: `owner`) does not take (a typo must not be
    silently ignored); the error lists `shown`, by default those `allowed`."""
    for name in sorted(set(arguments) - allowed):
        if name == "scope":
            continue  # scope_argument explains the lock
        takes = ", ".join(sorted(shown if shown is not None else allowed)) or "no parameters"
        if name == "global":  # on a tool that stores nothing: it reads the global scope already
            raise InvalidInput("global", f"{owner} takes no global; it takes {takes}")
        # A name is the client's: one line, nothing a terminal or a model reads as an order.
        shown_name = client_text(name)
        raise InvalidInput(shown_name, f"unknown parameter; {owner} takes {takes}")


def _required(arguments: dict[str, Any], name: str) -> Any:
    if arguments.get(name) is None:
        raise InvalidInput(name, "required")
    return arguments[name]


def _list(arguments: dict[str, Any], name: str, max_items: int | None = None) -> list[Any] | None:
    """An array argument; with `max_items` (the schema's maxItems) at most that many items as
    sent, repeats counted: the facade counts them once de-duplicated, so 200,000 copies of one
    tag would pass it."""
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidInput(name, f"must be an array, got {json_type(value)}")
    if max_items is not None and len(value) > max_items:
        raise InvalidInput(name, f"at most {max_items} items, got {len(value)}")
    return value


def _bool(arguments: dict[str, Any], name: str, default: bool) -> bool:
    return check_flag(name, arguments.get(name, default))


def _plural(n: int, word: str, plural: str) -> str:
    return f"{n} {word if n == 1 else plural}"


# ---- memorize -----------------------------------------------------------------------------


def memorize(brain: Brain, arguments: dict[str, Any]) -> Reply:
    """Store one memory (and its links)."""
    source = arguments.get("source")
    if source is not None and source not in SOURCES:
        raise InvalidInput("source", f"must be one of {', '.join(SOURCES)}, got {as_json(source)}")
    links = _list(arguments, "related_to")
    for i, link in enumerate(links or []):
        kind = link.get("relationship_type", "related_to") if isinstance(link, dict) else None
        if isinstance(link, dict) and kind not in LINK_TYPES:
            raise InvalidInput(
                f"related_to[{i}].relationship_type",
                f"must be one of {', '.join(LINK_TYPES)}, got {as_json(kind)}",
            )
    stored = brain.memorize(
        _required(arguments, "title"),
        _required(arguments, "content"),
        memory_type=arguments.get("memory_type"),
        importance=arguments.get("importance"),
        tags=_list(arguments, "tags", MAX_TAGS),
        related_files=_list(arguments, "related_files", MAX_FILES),
        source=source,
        related_to=links,
        global_=_bool(arguments, "global", False),
    )
    from octobrain.memory.render import format_stored

    memory, edges = stored
    return Reply(format_stored(memory, edges, brain.findings_left(edges), stored.already))


# ---- ingest -------------------------------------------------------------------------------


@dataclass
class IngestPlan:
    """An `ingest` call checked and parsed (under the pool lock, `plan_ingest`); `embed` then
    computes the vectors of its turns not stored yet without the lock, so a long conversation
    does not hold up other calls for its embedding; `ingest` writes it under the lock again."""

    key: str
    conversation: Conversation
    global_: bool
    embedder: Embedder
    texts: list[str]
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def embed(self, stop: threading.Event | None = None) -> None:
        """The embeddings of `texts`, added to `vectors` (the embedder is safe to share across
        threads); `Stopped` between batches once `stop` is set (the call's client cancelled
        it or is gone: nothing of it is written)."""
        from octobrain.embed.base import in_batches

        texts = [t for t in dict.fromkeys(self.texts) if t not in self.vectors]
        for start, part in in_batches(self.embedder, texts, "turns", stop):
            self.vectors.update(zip(texts[start : start + len(part)], part, strict=True))


def plan_ingest(brain: Brain, arguments: dict[str, Any]) -> IngestPlan:
    """Check an `ingest` call's arguments and find the turns it would embed."""
    from octobrain.memory.chat_keys import read_as
    from octobrain.memory.conversation import conversation_name, parse_chat
    from octobrain.memory.ingest import unstored_texts
    from octobrain.models import CONTENT_BYTES

    key = conversation_name("conversation", _required(arguments, "conversation"))
    turns = _list(arguments, "turns") or []
    if not 1 <= len(turns) <= INGEST_TURNS:
        raise InvalidInput("turns", f"give 1–{INGEST_TURNS} turns, got {len(turns)}")
    size = sum(  # (a lone surrogate is `parse_chat`'s field error, not an internal one)
        byte_len(t["text"]) for t in turns if isinstance(t, dict) and isinstance(t.get("text"), str)
    )
    if size > INGEST_BYTES:
        raise InvalidInput("turns", f"must hold at most {INGEST_BYTES} bytes of text, got {size}")
    for i, turn in enumerate(turns):
        extra = (
            sorted(set(turn) - {"speaker", "text", "time", "session", "id"})
            if isinstance(turn, dict)
            else []
        )
        if extra:  # the name is the client's: cut, one line, as `check_arguments` shows it
            shown_name = client_text(extra[0])
            meant = read_as(extra[0])  # (a file's export may spell it so; the schema does not)
            raise InvalidInput(
                f"turns[{i}].{shown_name}",
                "unknown field; a turn takes speaker, text, time, session, id"
                + (f" (write it as {meant})" if meant else ""),
            )
        text = turn.get("text") if isinstance(turn, dict) else None
        if isinstance(text, str) and byte_len(text) > CONTENT_BYTES[1]:
            raise InvalidInput(
                f"turns[{i}].text",
                f"must be at most {CONTENT_BYTES[1]} bytes; send a longer turn as several turns",
            )
    conversation = parse_chat(turns, key=key)
    global_ = _bool(arguments, "global", False)
    texts = unstored_texts(brain, [conversation], global_=global_)
    return IngestPlan(key, conversation, global_, brain.embedder, texts)


def ingest(brain: Brain, plan: IngestPlan, *, last: bool = True) -> Reply | None:
    """Store a planned conversation's turns (each once), with the vectors the plan computed.

    Turns the store no longer holds that the plan has no vector for (forgotten since it was
    made) would be embedded here, under the pool lock: unless this is the `last` attempt, they
    become the plan's texts instead and None is returned, so the caller embeds them first."""
    from octobrain.memory.ingest import NotEmbedded

    try:
        report = brain.ingest(
            [plan.conversation], global_=plan.global_, vectors=plan.vectors, embed_missing=last
        )
    except NotEmbedded as missing:
        plan.texts = missing.texts
        return None
    scope = "" if plan.global_ else brain.scope
    return Reply(
        f"Conversation {as_json(plan.key)} stored in {scope or '(global)'}: "
        f"{report.summary(_plural(report.added, 'turn', 'turns'))}, "
        f"{_plural(report.links, 'link', 'links')}."
    )


# ---- remember -----------------------------------------------------------------------------


def remember(brain: Brain, arguments: dict[str, Any]) -> Reply:
    """Hybrid search over the visible memories, with graph context."""
    from octobrain.memory.render import ARCHIVED_MCP, format_recall

    query = _required(arguments, "query")
    if not isinstance(query, str | list):
        raise InvalidInput(
            "query", f"must be a string or an array of strings, got {as_json(query)}"
        )
    recall = brain.remember(
        query,
        memory_types=_list(arguments, "memory_types"),
        tags=_list(arguments, "tags", MAX_TAGS),
        related_files=_list(arguments, "related_files", MAX_FILES),
        created_after=_time(arguments, "created_after"),
        created_before=_time(arguments, "created_before"),
        min_relevance=arguments.get("min_relevance"),
        limit=arguments.get("limit"),
    )
    return Reply(format_recall(recall, ARCHIVED_MCP))


def _time(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(name, f"must be an ISO-8601 string, got {as_json(value)}")
    return value


# ---- forget -------------------------------------------------------------------------------


def _listing(memories: Sequence[Memory], damaged: Set[str] = frozenset()) -> str:
    """One line per memory; a damaged one (`forget_targets`) is named, its text not shown."""
    from octobrain.store.schema import DAMAGED_TITLE

    return "\n".join(
        f"- {m.id}  {DAMAGED_TITLE}"
        if m.id in damaged
        else f"- {m.id}  {m.source.label} {one_line(m.title)} ({m.memory_type.value}, "
        f"scope {m.scope or '(global)'}): {glimpse(m.content)}"
        for m in memories
    )


def forget(brain: Brain, arguments: dict[str, Any]) -> Reply:
    """Delete by id or by query; without confirm: true, only preview (as a tool error)."""
    if "confirm" not in arguments:
        raise InvalidInput("confirm", "required: true to delete, false to preview")
    confirm = _bool(arguments, "confirm", False)
    memory_id, query = arguments.get("memory_id"), arguments.get("query")
    if (memory_id is None) == (query is None):
        raise InvalidInput("memory_id", "give exactly one of memory_id or query")
    if memory_id is not None:
        for name in ("memory_types", "tags"):  # (the field given is the one named)
            if _list(arguments, name, MAX_TAGS):
                raise InvalidInput(name, "filters apply only with query, not memory_id")
        targets, damaged = brain.forget_targets([memory_id])
    else:
        if not isinstance(query, str):
            raise InvalidInput("query", f"must be a string, got {json_type(query)}")
        targets, damaged = (
            brain.forget_preview(
                query,
                memory_types=_list(arguments, "memory_types"),
                tags=_list(arguments, "tags", MAX_TAGS),
            ),
            set(),
        )
    if not targets:
        return Reply("Nothing matches the query; nothing was deleted.")
    from octobrain.memory.render import UNDO_NOTE, released_lines

    if not confirm:
        return Reply(
            "confirm: must be true to delete. Nothing was deleted.\n"
            f"The same call with confirm: true would delete "
            f"{_plural(len(targets), 'memory', 'memories')}:\n{_listing(targets, damaged)}",
            error=True,
        )
    forgotten = brain.forget([m.id for m in targets], confirm=True)
    return Reply(
        "\n".join(
            [
                f"Deleted {_plural(forgotten.deleted, 'memory', 'memories')} ({UNDO_NOTE}):",
                _listing(targets, damaged),
                *released_lines(forgotten),
            ]
        )
    )


# ---- knowledge ----------------------------------------------------------------------------


# Knowledge commands that only read (a search may index its source, stopped between batches):
# not begun once their client is gone. A `delete`, once sent, is done; a `store` stops only
# in its embedding, nothing written.
_KNOWLEDGE_READS = frozenset({"search", "read", "match"})


def knowledge(knowledge: Knowledge, arguments: dict[str, Any]) -> Reply:
    """One knowledge command (search | read | match | store | delete) as text."""
    from octobrain.knowledge import run_command

    command = _required(arguments, "command")
    if command not in KNOWLEDGE_COMMANDS:
        raise InvalidInput(
            "command", f"must be one of {', '.join(KNOWLEDGE_COMMANDS)}, got {as_json(command)}"
        )
    run: Callable[[Knowledge], str] = partial(run_command, arguments=arguments)
    if command in _KNOWLEDGE_READS:  # (its client gone while it waited for the lock: not run)
        run = unless_stopped(run, knowledge.stop)
    return Reply(run(knowledge))
