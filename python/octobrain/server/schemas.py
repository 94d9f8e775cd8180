"""The MCP tools: names, descriptions that teach the discipline, flat input schemas.

Schemas are plain JSON Schema, made of `server.tool_spec`'s pieces (no `$ref`/`$defs`, no
nullable unions). Limits come from `octobrain.models`, the same
constants the facade enforces, so the schema never promises what the server then rejects; the
defaults and bounds a user sets (`memory.default_importance`, `search.*`) come from the config
the server runs with (`tools_for`). Importing this module is cheap: it needs only the enums and
limits.
"""

from __future__ import annotations

from octobrain.config import Config, MemoryConfig, SearchConfig
from octobrain.field_checks import ID_CHARS
from octobrain.memory.turn_fields import SESSION_CHARS, SPEAKER_CHARS
from octobrain.models import (
    CONTENT_BYTES,
    FILE_BYTES,
    KEEP_VERSIONS_DAYS,
    KEY_BYTES,
    LINK_DESCRIPTION_CHARS,
    LINK_TYPES,
    MAX_FILES,
    MAX_LINKS,
    MAX_QUERIES,
    MAX_TAGS,
    MAX_TYPE_FILTERS,
    NOTE_BYTES,
    PATTERN_BYTES,
    QUERY_BYTES,
    QUERY_RULE,
    SOURCE_BYTES,
    TAG_CHARS,
    TITLE_BYTES,
    MemoryType,
)
from octobrain.server.tool_spec import ToolSpec, flag, string, string_list, utf8_string

MEMORY_TYPES = [t.value for t in MemoryType]
SOURCES = ["user_confirmed", "agent_inferred"]
KNOWLEDGE_COMMANDS = ["search", "read", "match", "store", "delete"]
INGEST_TURNS = 500
INGEST_BYTES = 1_000_000


ID_HELP = "Id of {what}: the full id, or a unique prefix of at least 8 hex digits."
SCOPE = string(
    "Project scope this call works in, e.g. 'github.com/acme/api' (see the server instructions "
    "for the scopes found on this machine). Use '' for the global scope, which every project "
    "can read. A project scope reads its own memories plus global ones. Not needed when the "
    "session is locked to a project (by the client's roots): then only that project's scope, "
    "or '' for storing in the global scope, is accepted."
)

# Importance anchors the memorize description teaches; the configured default is marked.
_ANCHORS = (
    ("1.0", "critical, must never be forgotten"),
    ("0.8", "an important decision or preference"),
    ("0.5", "normal useful knowledge"),
    ("0.3", "minor detail"),
)


def _anchors(default: float) -> str:
    """The anchors, "(default)" after the one `memory.default_importance` is, else that
    default named after them."""
    marked = [f"{v} {what}{' (default)' if float(v) == default else ''}" for v, what in _ANCHORS]
    if all(float(v) != default for v, _ in _ANCHORS):
        marked.append(f"default {default:g} (memory.default_importance)")
    return "; ".join(marked)


def _memorize(memory: MemoryConfig) -> ToolSpec:
    """`memorize`, its default importance the configured one."""
    return ToolSpec(
        name="memorize",
        title="Store a memory",
        description=(
            "Store one durable insight so future sessions can recall it.\n\n"
            "ALWAYS call `remember` first: if a memory already says this, do not store a "
            "duplicate; if your new fact replaces an old one, store it with related_to "
            "[{target_id: <old id>, relationship_type: 'supersedes'}] (the old one then ranks far "
            "below the new one but stays retrievable).\n\n"
            "Store: decisions and their reasons, user preferences, conventions, non-obvious bug "
            "causes and fixes, architecture facts, gotchas that cost time. Do NOT store: transient "
            "state (what you are doing right now), things trivially re-derived from the code or "
            "git log, secrets or credentials, or a restatement of the conversation.\n\n"
            "source: 'user_confirmed' for facts the user stated or approved (importance 0.8–1.0); "
            "'agent_inferred' (default) for your own conclusions (importance 0.3–0.6). Importance "
            f"anchors: {_anchors(memory.default_importance)}.\n\n"
            "Goal workflow: store the objective as memory_type 'goal'; link each finding that "
            "contributes to it with relationship_type 'achieves' (target = the goal's id); when "
            "done, store a completion note with relationship_type 'closes' pointing at the goal, "
            "which consolidates the goal and its findings.\n\n"
            "Title 5–200 bytes, content 10–10000 bytes. Returns the new memory's id. The same "
            "memory_type, title and content sent again (a retry) stores no copy: the answer is the "
            "memory already stored, given any tags, files, links, higher importance or trust the "
            "call adds."
        ),
        properties={
            "title": utf8_string(
                "Short, specific title (5–200 bytes of UTF-8).", TITLE_BYTES[0], TITLE_BYTES[1]
            ),
            "content": utf8_string(
                "The memory itself, self-contained: what, why, and where it applies "
                "(10–10000 bytes of UTF-8).",
                CONTENT_BYTES[0],
                CONTENT_BYTES[1],
            ),
            "memory_type": {
                "type": "string",
                "enum": MEMORY_TYPES,
                "default": "code",
                "description": "Kind of knowledge. Use 'goal' for an objective that findings "
                "'achieve' and a completion note 'closes'.",
            },
            "importance": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": memory.default_importance,
                "description": "0–1. Anchors: 1.0 critical, 0.8 important, 0.5 normal, 0.3 minor.",
            },
            "tags": string_list(
                f"Up to {MAX_TAGS} short tags (each at most {TAG_CHARS} characters).",
                MAX_TAGS,
                TAG_CHARS,
            ),
            "related_files": string_list(
                f"Up to {MAX_FILES} repository-relative file paths this memory is about "
                f"(each at most {FILE_BYTES} bytes of UTF-8).",
                MAX_FILES,
                FILE_BYTES,
            ),
            "source": {
                "type": "string",
                "enum": SOURCES,
                "default": "agent_inferred",
                "description": "'user_confirmed': the user stated or approved it. "
                "'agent_inferred': your own conclusion.",
            },
            "related_to": {
                "type": "array",
                "maxItems": MAX_LINKS,
                "description": "Typed links from this new memory to existing ones (ids from "
                "`remember`). 'supersedes' replaces an outdated memory; 'conflicts' says the "
                "target states another value of the same thing and this one holds (the target then "
                "ranks just below it, unless the target is more trusted); 'achieves' contributes "
                "to a goal; 'closes' completes a goal. 'supersedes' settles a dispute (no "
                "'conflicts' link stands beside it); supersedes, conflicts, extends, implements "
                "and achieves run one way between two memories; a memory closes one goal.",
                "items": {
                    "type": "object",
                    "properties": {
                        "target_id": string(ID_HELP.format(what="an existing memory"), 1, ID_CHARS),
                        "relationship_type": {
                            "type": "string",
                            "enum": LINK_TYPES,
                            "default": "related_to",
                        },
                        "strength": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.8},
                        "description": string("Why they are linked.", None, LINK_DESCRIPTION_CHARS),
                    },
                    "required": ["target_id"],
                    "additionalProperties": False,
                },
            },
            "global": flag(
                "Store in the global scope (visible from every project) instead of this "
                "session's project (the same as scope ''). Only for facts that hold everywhere, "
                "e.g. the user's general preferences."
            ),
            "scope": SCOPE,
        },
        required=["title", "content"],
        read_only=False,
        destructive=False,
        idempotent=False,
    )


def _remember(search: SearchConfig) -> ToolSpec:
    """`remember`, its threshold, limit and ceiling the configured ones (the facade refuses a
    limit past `search.max_results`)."""
    return ToolSpec(
        name="remember",
        title="Recall memories",
        description=(
            "Search stored memories by meaning and by exact words (hybrid BM25 + vector).\n\n"
            "Call it at the start of every task and before every `memorize`. Give 2–5 different "
            "phrasings or key terms as a list for better recall (they are searched separately and "
            "fused). Only memories above `min_relevance` come back, so 'nothing found' is a real "
            "answer, not an error.\n\n"
            "Each result shows a trust label ([CONFIRMED] the user stated it, [INFERRED] an agent "
            "concluded it, [IMPORTED], [AUTO]), score and relevance, type, importance, creation "
            "time, tags and files, its id, the content and a `Why:` line; then up to 3 related "
            "memories one graph edge away, with the edge's type and direction. Prefer [CONFIRMED] "
            "over [INFERRED] when they disagree.\n\n"
            "For questions about time ('what did we decide last week'), set created_after / "
            "created_before: you know today's date, so compute the bounds (ISO-8601 or YYYY-MM-DD; "
            "a bare date in created_before includes that day). A day, month or year named in the "
            "query itself ('on 3 June 2026', 'in March') makes memories created then rank higher "
            "without filtering out the others."
        ),
        properties={
            "query": {
                "anyOf": [
                    utf8_string(
                        f"One query ({QUERY_RULE} of UTF-8).", QUERY_BYTES[0], QUERY_BYTES[1]
                    ),
                    {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "minLength": -(-QUERY_BYTES[0] // 4),
                            "maxLength": QUERY_BYTES[1],
                        },
                        "minItems": 1,
                        "maxItems": MAX_QUERIES,
                    },
                ],
                "description": f"A query ({QUERY_RULE}) or a list of 1–{MAX_QUERIES} queries.",
            },
            "memory_types": {
                "type": "array",
                "items": {"type": "string", "enum": MEMORY_TYPES},
                "maxItems": MAX_TYPE_FILTERS,
                "description": "Only memories of these types.",
            },
            "tags": string_list("Only memories having any of these tags.", MAX_TAGS, TAG_CHARS),
            "related_files": string_list(
                f"Only memories about any of these files (each at most {FILE_BYTES} bytes of "
                "UTF-8).",
                MAX_FILES,
                FILE_BYTES,
            ),
            # ("" is refused, not taken for no bound: leave the field out for that.)
            "created_after": string("Only memories created at or after this time (ISO-8601).", 1),
            "created_before": string(
                "Only memories created before this time (ISO-8601; a bare date includes the day).",
                1,
            ),
            "min_relevance": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": search.min_relevance,
                "description": "Calibrated relevance threshold (cosine-like, 0–1).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": search.max_results,
                "default": search.default_limit,
                "description": "Maximum results.",
            },
            "scope": SCOPE,
        },
        required=["query"],
        read_only=True,
        destructive=False,
        idempotent=True,
    )


FORGET = ToolSpec(
    name="forget",
    title="Delete memories",
    description=(
        "Delete memories: they leave every search at once, and you cannot undo it (a person "
        f"can, with `octobrain memory restore`, for {KEEP_VERSIONS_DAYS} days).\n\n"
        "Needs confirm: true. Without it nothing is deleted and you get an error that lists "
        "exactly what a confirmed call would delete, so call it first with confirm: false to "
        "preview, check the list, then repeat the same call with confirm: true.\n\n"
        "Give either memory_id (one memory) or query (every memory the query finds, with the "
        "optional memory_types / tags filters; a confirmed query call deletes exactly what the "
        "same preview lists at that moment).\n\n"
        "Do not delete a memory because it is old or unused: unused memories already fade in "
        "the ranking and never clutter results. Delete only what is wrong, harmful, or was "
        "stored by mistake; to correct a fact, prefer memorizing the new one with a "
        "'supersedes' link."
    ),
    properties={
        "confirm": {
            "type": "boolean",
            "description": "Must be true to delete. false: preview only, nothing is deleted.",
        },
        "memory_id": string(ID_HELP.format(what="the one memory to delete"), 1, ID_CHARS),
        "query": utf8_string(
            f"Delete the memories this query finds ({QUERY_RULE} of UTF-8).",
            QUERY_BYTES[0],
            QUERY_BYTES[1],
        ),
        "memory_types": {
            "type": "array",
            "items": {"type": "string", "enum": MEMORY_TYPES},
            "maxItems": MAX_TYPE_FILTERS,
            "description": "Query mode: only memories of these types.",
        },
        "tags": string_list(
            "Query mode: only memories having any of these tags.", MAX_TAGS, TAG_CHARS
        ),
        "scope": SCOPE,
    },
    required=["confirm"],
    read_only=False,
    destructive=True,
    idempotent=True,
)

KNOWLEDGE = ToolSpec(
    name="knowledge",
    title="External documents",
    description=(
        "What you READ, as opposed to what you conclude (that goes to `memorize`): index, "
        "search, read and grep external documents — design docs, API docs, papers, web pages. "
        "A source is ONE local file (absolute, relative, ~/ or file://) or ONE http(s) URL, "
        "never a directory; types .md .txt .html .pdf .docx .epub .odt .rtf.\n"
        "command:\n"
        "- search (query; optional source): hybrid search over indexed sections, citing the "
        "source and section. Naming a source indexes it first (and re-indexes it when its "
        "content changed), so `search` with a source is the way to add a document.\n"
        "- read (source; optional from_line, from_byte): the extracted text, a page at a "
        "time: a reply holds whole lines up to a size bound and ends by naming the from_line "
        "of the next page (line numbers as `match` reports them), and from_byte too when it "
        "cut a line longer than a page.\n"
        "- match (pattern; optional source): regex over indexed text with absolute line "
        "numbers, capped; a named file or URL is grepped as it reads now, not indexed.\n"
        "- store (key, content) / delete (key): a note for this session under a key "
        "(stored://key), searchable like a document; store refuses an existing key.\n"
        "Local files are read only inside this session's project (its roots, else the "
        "server's working directory) or directories the user allowed (knowledge.allow_paths). "
        "URLs on private or loopback addresses are refused unless the user allowed them in "
        "the config."
    ),
    properties={
        "command": {"type": "string", "enum": KNOWLEDGE_COMMANDS},
        "query": utf8_string(
            f"search: what to look for ({QUERY_RULE} of UTF-8).", QUERY_BYTES[0], QUERY_BYTES[1]
        ),
        "source": utf8_string(
            f"A single file path or http(s) URL (at most {SOURCE_BYTES} bytes of UTF-8).",
            1,
            SOURCE_BYTES,
        ),
        "pattern": utf8_string(
            f"match: a regular expression (at most {PATTERN_BYTES} bytes of UTF-8).",
            1,
            PATTERN_BYTES,
        ),
        "from_line": {
            "type": "integer",
            "minimum": 1,
            "default": 1,
            "description": "read: the line the page starts at (1 = the start).",
        },
        "from_byte": {
            "type": "integer",
            "minimum": 0,
            "default": 0,
            "description": "read: where in line from_line the page starts, in bytes: what a "
            "reply that cut a line longer than a page names for its next page.",
        },
        "key": utf8_string(
            f"store / delete: the note's key (1–{KEY_BYTES} bytes of UTF-8).", 1, KEY_BYTES
        ),
        "content": string(
            f"store: the note's text, at most {NOTE_BYTES} bytes of UTF-8.", 1, NOTE_BYTES
        ),
        "scope": SCOPE,
    },
    required=["command"],
    read_only=False,
    destructive=True,
    idempotent=False,
    open_world=True,
)

INGEST = ToolSpec(
    name="ingest",
    title="Store a conversation",
    description=(
        "Store a conversation transcript turn by turn, so later `remember` calls can answer "
        "'what did we say about X, and when?'.\n\n"
        "Each turn becomes one memory: shown as it was said (title: speaker and date), indexed "
        "with its speaker, its session's date and the neighbouring turns, and linked to the "
        "previous turn of its session. Ingesting the same conversation again adds only turns "
        "not stored yet: a turn is known by its `id`, else by its `time`, speaker and words, "
        "so calls may overlap; a turn with neither is known by its place in the call, so "
        "send those whole.\n\n"
        f"At most {INGEST_TURNS} turns and {INGEST_BYTES // 1000} kB of text per call, the "
        "whole request within 1 MiB as JSON (escapes included); longer transcripts go in "
        "several calls with the same `conversation`. Turns are "
        "screened for secrets like `memorize`."
    ),
    properties={
        "conversation": string(
            "A stable name for the conversation (e.g. its session id); turns are stored "
            f"under it (1–{ID_CHARS} characters).",
            1,
            ID_CHARS,
        ),
        "turns": {
            "type": "array",
            "minItems": 1,
            "maxItems": INGEST_TURNS,
            "description": "The turns in order.",
            "items": {
                "type": "object",
                "properties": {
                    "speaker": string(
                        f"Who said it (a longer name is cut to {SPEAKER_CHARS} characters).", 1
                    ),
                    "text": string("What was said.", None, CONTENT_BYTES[1]),
                    "time": string('When it was said (ISO-8601); "" or left out when not known.'),
                    "session": string(
                        "Session label; without it a new session starts after 4 hours of silence.",
                        1,
                        SESSION_CHARS,
                    ),
                    "id": string("A stable id of the turn.", 1, ID_CHARS),
                },
                "required": ["speaker", "text"],
                "additionalProperties": False,
            },
        },
        "global": flag(
            "Store in the global scope instead of this session's project (the same as scope '')."
        ),
        "scope": SCOPE,
    },
    required=["conversation", "turns"],
    read_only=False,
    destructive=False,
    idempotent=True,
)


def tools_for(config: Config) -> tuple[ToolSpec, ...]:
    """The tools as a server running with `config` lists them: the defaults and bounds it
    applies to an argument left out or sent."""
    return (_memorize(config.memory), _remember(config.search), FORGET, KNOWLEDGE, INGEST)


# With the default config: for what does not depend on it (names, arguments, annotations).
TOOLS = tools_for(Config())
TOOLS_BY_NAME = {t.name: t for t in TOOLS}


def allowed_arguments(name: str, *, locked: bool) -> frozenset[str]:
    """The argument names a tool accepts in this session (after `scoping.global_argument`)."""
    return frozenset(TOOLS_BY_NAME[name].input_schema(locked=locked)["properties"])
