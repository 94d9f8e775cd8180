"""The configuration's schema: every key as a typed frozen dataclass field with its default,
a one-line doc (the template's comment) and the rule its value must keep.

Loading, the environment overrides and rendering live in `octobrain.config.loader`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from octobrain.config.private_hosts import allow_hosts_rule
from octobrain.config.rules import (
    Rule,
    base_url_rule,
    bind_rule,
    in_range,
    model_rule,
    one_of,
    storage_options_problem,
    storage_uri_rule,
    token_rule,
)

CONFIG_VERSION = 1
# A window of days reaching further back than a century is a typo, not a window, and a large
# enough one overflows the date arithmetic (`now - timedelta(days=...)`).
MAX_DAYS = 36_500
# A briefing's token budget, the setting's and any one call's (`--max-tokens`, MCP).
BRIEF_TOKENS = (50, 100_000)


def _opt(default: Any, doc: str, rule: Rule | None = None) -> Any:
    """A config key: its default, a one-line doc (the template's comment) and a rule."""
    if isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata={"doc": doc, "rule": rule})
    return field(default=default, metadata={"doc": doc, "rule": rule})


@dataclass(frozen=True)
class EmbeddingConfig:
    """`[embedding]`: which model turns text into vectors."""

    model: str = _opt(
        "minilm",
        "minilm (bundled all-MiniLM-L6-v2, offline) | fastembed:<name> | openai:<model> | "
        "voyage:<model> | jina:<model> | hash:<dim> (tests)",
        model_rule,
    )
    batch_size: int = _opt(32, "texts per model call when embedding in bulk", in_range(1, 2048))
    timeout_secs: float = _opt(
        30.0, "timeout of one cloud embedding request, seconds", in_range(0, 600, lo_open=True)
    )
    allow_download: bool = _opt(
        False, "let fastembed download a model that is not cached (network access)"
    )
    base_url: str = _opt(
        "", "override the cloud provider's API base URL (empty: the provider's)", base_url_rule
    )


@dataclass(frozen=True)
class StorageConfig:
    """`[storage]`: where memories live."""

    uri: str = _opt(
        "",
        "LanceDB directory or object-store URI (s3://, s3+ddb://, gs://, az://); "
        "empty: <data dir>/db",
        storage_uri_rule,
    )
    options: tuple[str, ...] = _opt(
        (),
        "object-store options as key=value (e.g. region=eu-west-1, aws_endpoint=https://...); "
        "credentials are best left to the standard environment variables",
        storage_options_problem,
    )
    remote_refresh_ms: int = _opt(
        1000,
        "on object storage, how old a read may be: another machine's writes show within this "
        "time (0: ask the bucket on every read); writes always start from the latest version",
        in_range(0, 60000),
    )


@dataclass(frozen=True)
class HydeConfig:
    """`[search.hyde]`: pseudo-relevance feedback on the query vector."""

    enabled: bool = _opt(
        False, "blend the query vector with the centroid of the top results (measured: no gain)"
    )
    top_k: int = _opt(3, "results in the centroid", in_range(1, 50))
    alpha: float = _opt(0.5, "weight kept on the original query vector", in_range(0, 1))
    min_results: int = _opt(2, "results needed before blending", in_range(1, 50))


@dataclass(frozen=True)
class SearchConfig:
    """`[search]`: the hybrid retrieval pipeline."""

    min_relevance: float = _opt(
        0.3, "default threshold on calibrated relevance (cosine similarity)", in_range(0, 1)
    )
    default_limit: int = _opt(5, "results when the caller gives no limit", in_range(1, 1000))
    max_results: int = _opt(50, "hard ceiling on results per search", in_range(1, 1000))
    candidates: int = _opt(
        100, "candidates per leg (vector, BM25) before fusion", in_range(1, 10000)
    )
    fusion: str = _opt(
        "zscore",
        "zscore | minmax (score fusion over both legs' candidates) | rrf (ranks only)",
        one_of("rrf", "minmax", "zscore"),
    )
    rrf_k: int = _opt(60, "k of reciprocal-rank fusion", in_range(1, 100000))
    vector_weight: float = _opt(1.0, "weight of the vector leg in fusion", in_range(0, 100))
    bm25_weight: float = _opt(1.0, "weight of the BM25 leg in fusion", in_range(0, 100))
    importance_weight: float = _opt(
        0.1, "bounded boost from decayed importance (0 = off)", in_range(0, 1)
    )
    recency_weight: float = _opt(0.1, "bounded boost from recency (0 = off)", in_range(0, 1))
    recency_decay_days: float = _opt(
        30.0, "recency = exp(-age_days / this)", in_range(0, None, lo_open=True)
    )
    ann_min_rows: int = _opt(
        200_000,
        "from this many memories the first vector pass is LanceDB's ANN index, re-scored "
        "exactly (0: always exact)",
        in_range(0, None),
    )
    snapshot_min_rows: int = _opt(
        5_000,
        "from this many memories a memory-mapped snapshot of the search mirror is kept on this "
        "machine, so a new process opens it instead of reading the whole store (0: never)",
        in_range(0, None),
    )
    hyde: HydeConfig = field(default_factory=HydeConfig)


MIN_HALF_LIFE_DAYS = 1 / 24  # an hour: anything shorter puts every memory at the floor at once


def _half_life_rule(v: Any) -> str | None:
    """A half-life of an hour to a century: 5e-324 put every memory at the decay floor a
    microsecond after its last access, and 1e300 (86,400 x it is inf) disabled decay unsaid."""
    if math.isfinite(v) and MIN_HALF_LIFE_DAYS <= v <= MAX_DAYS:
        return None
    return (
        f"must be a number of days from 1/24 (an hour) to {MAX_DAYS:,} (a century), got {v}; "
        "to turn decay off, set decay_enabled = false"
    )


@dataclass(frozen=True)
class MemoryConfig:
    """`[memory]`: importance, decay and links."""

    default_importance: float = _opt(0.5, "importance of a new memory", in_range(0, 1))
    decay_enabled: bool = _opt(True, "let unused memories fade in the ranking (never deleted)")
    decay_half_life_days: float = _opt(
        90.0, "days for importance to halve without access", _half_life_rule
    )
    access_boost_factor: float = _opt(1.2, "reinforcement per access (log-scaled)", in_range(1, 10))
    min_importance_threshold: float = _opt(0.05, "floor of decayed importance", in_range(0, 1))
    auto_linking_enabled: bool = _opt(True, "link a new memory to its nearest neighbours")
    auto_link_threshold: float = _opt(0.78, "cosine similarity needed to auto-link", in_range(0, 1))
    max_auto_links_per_memory: int = _opt(5, "at most this many auto links", in_range(0, 100))
    bidirectional_links: bool = _opt(True, "auto links go both ways")
    secrets: str = _opt(
        "refuse",
        "credentials (API keys, tokens, private keys) in title/content: refuse | redact | allow",
        one_of("refuse", "redact", "allow"),
    )


@dataclass(frozen=True)
class ConsolidationConfig:
    """`[consolidation]`: sleep consolidation of near-duplicates and goal closing."""

    sleep_enabled: bool = _opt(True, "cluster recent near-duplicates lazily at startup")
    interval_hours: float = _opt(24.0, "minimum hours between passes per scope", in_range(1, None))
    threshold: float = _opt(0.85, "cosine similarity within a cluster", in_range(0, 1))
    min_cluster_size: int = _opt(3, "smallest cluster that is merged", in_range(2, 1000))
    max_age_days: float = _opt(
        7.0, "only memories younger than this", in_range(0, MAX_DAYS, lo_open=True)
    )
    # Complete linkage: every pair in a cluster is at least `threshold` similar (no chaining).
    linkage: str = _opt("complete", "complete | average", one_of("average", "complete"))
    member_importance_factor: float = _opt(
        0.2, "importance multiplier of consolidated members", in_range(0, 1)
    )
    goal_parent_boost: float = _opt(
        1.1, "parent importance = max(sources) x this, capped at 1", in_range(1, 2)
    )
    detect_conflicts: bool = _opt(
        True,
        "record which of two near-identical memories quoting different numbers prevails "
        "(the more trusted, else the newer); it then ranks above the other",
    )
    archive_enabled: bool = _opt(True, "archive long-faded memories during the sleep pass")
    archive_after_days: float = _opt(
        90.0,
        "archive once decayed importance sat at the floor, untouched, this long",
        in_range(0, MAX_DAYS, lo_open=True),
    )


@dataclass(frozen=True)
class BriefConfig:
    """`[brief]`: the session briefing (`octobrain brief`, the SessionStart hook, MCP prompt)."""

    max_tokens: int = _opt(
        1500, "token budget of a briefing (the embedder's tokenizer)", in_range(*BRIEF_TOKENS)
    )
    recent_days: float = _opt(
        14.0, "what happened this recently may appear under Recent", in_range(0, None, lo_open=True)
    )
    achieved_days: float = _opt(
        30.0, "goals closed this recently appear as achieved", in_range(0, None, lo_open=True)
    )
    duplicate_threshold: float = _opt(
        0.9, "cosine similarity at which two items collapse into one", in_range(0, 1)
    )
    max_items_per_section: int = _opt(12, "at most this many items per section", in_range(1, 200))
    gist_after_days: float = _opt(
        7.0, "episodic memories older than this may be shown as a gist", in_range(0, None)
    )
    gist_strength: float = _opt(
        0.3, "and only when their decayed importance fell below this", in_range(0, 1)
    )
    gist_max_chars: int = _opt(240, "longest gist, characters", in_range(40, 10_000))
    session_neighbour: bool = _opt(
        True, "remember brings one memory of the same session along (labelled)"
    )


@dataclass(frozen=True)
class KnowledgeConfig:
    """`[knowledge]`: external documents."""

    chunk_size: int = _opt(1200, "bytes per child chunk", in_range(100, 1_000_000))
    chunk_overlap: int = _opt(300, "bytes shared by neighbouring chunks", in_range(0, 1_000_000))
    parent_size: int = _opt(4800, "bytes per parent section", in_range(100, 10_000_000))
    chunk_fit_model: bool = _opt(
        True,
        "also cut each chunk (with its title header) to the embedding model's input window, "
        "counted with its tokenizer (the bundled MiniLM reads 256 tokens)",
    )
    outdating_days: float = _opt(15.0, "a URL older than this is re-fetched", in_range(0, None))
    max_results: int = _opt(5, "results per knowledge search", in_range(1, 1000))
    session_ttl_hours: float = _opt(
        120.0, "session notes older than this are removed", in_range(0, None, lo_open=True)
    )
    min_relevance: float = _opt(
        0.3,
        "results below this calibrated relevance (cosine / word coverage) are dropped",
        in_range(0, 1),
    )
    max_matches: int = _opt(
        100, "default cap on lines returned by `knowledge match`", in_range(1, 10000)
    )
    read_page_bytes: int = _opt(
        64 * 1024,
        "most text one MCP `knowledge read` reply holds, bytes (whole lines; the reply says "
        "where the next page starts)",
        in_range(1024, 2**30),
    )
    max_session_notes: int = _opt(
        1_000,
        "most `knowledge store` notes one session keeps at a time (a note past it is refused "
        "until the session deletes one, or they expire after session_ttl_hours)",
        in_range(1, 10_000_000),
    )
    max_session_note_bytes: int = _opt(
        32 * 1024 * 1024,
        "most bytes of UTF-8 text one session's notes hold together (each note is at most 32,768)",
        in_range(1, 2**40),
    )
    max_scope_notes: int = _opt(
        10_000,
        "most `knowledge store` notes all sessions of one project keep together (a client "
        "naming a new session for each batch gets no new room; they expire after "
        "session_ttl_hours)",
        in_range(1, 10_000_000),
    )
    max_source_bytes: int = _opt(
        50 * 1024 * 1024, "largest file or download accepted, bytes", in_range(1, 2**40)
    )
    max_source_chunks: int = _opt(
        10_000,
        "most chunks one source may make (each is embedded: 10,000 is about 9 MB of prose); a "
        "source that would make more is refused before any is embedded",
        in_range(1, 10_000_000),
    )
    mcp_max_source_chunks: int = _opt(
        1_000,
        "most chunks one MCP call embeds (a search naming a file or URL, a note; about 50 ms "
        "of CPU each with the bundled model, every other client's knowledge call waiting): a "
        "source over it is refused before any is embedded, and indexed at the command line "
        "instead, up to max_source_chunks",
        in_range(1, 10_000_000),
    )
    max_sources: int = _opt(
        5_000,
        "most files and URLs one project's knowledge index holds (and the global one): a new "
        "source past it is refused until sources are deleted (`knowledge delete-source`); one "
        "already indexed is always indexed again. Session notes are not counted",
        in_range(1, 10_000_000),
    )
    fetch_timeout_secs: float = _opt(
        30.0,
        "time allowed for fetching one URL (every redirect hop and the whole body), seconds",
        in_range(0, 600, lo_open=True),
    )
    max_redirects: int = _opt(5, "redirects followed per URL", in_range(0, 50))
    allow_private_hosts: tuple[str, ...] = _opt(
        (),
        "hosts, IPs or CIDR networks that URLs may reach although private, loopback or "
        "link-local (refused by default); HOST:PORT allows that port only, a plain HOST every "
        "port (e.g. 127.0.0.1:8000, [::1]:8000, 10.0.0.0/8, docs.internal)",
        allow_hosts_rule,
    )
    allow_paths: tuple[str, ...] = _opt(
        (),
        "directories MCP clients may read local files from, besides the session's project "
        "(its roots, else the server's working directory; over HTTP only these)",
    )


@dataclass(frozen=True)
class McpConfig:
    """`[mcp]`: the MCP server."""

    bind: str = _opt("", "HOST:PORT for streamable HTTP (empty: stdio)", bind_rule)
    token: str = _opt("", "bearer token; required for a non-loopback bind", token_rule)
    allowed_origins: tuple[str, ...] = _opt((), "extra Origin values accepted over HTTP")
    request_seconds: float = _opt(
        30.0,
        "over HTTP, the time a request's headers and body have to arrive (the connection is "
        "closed past it)",
        in_range(0, 3600, lo_open=True),
    )
    unread_seconds: float = _opt(
        30.0,
        "the time an answer may wait unread by its client, over HTTP and in the MCP sessions "
        "the resident service hosts; past it the answer is dropped and the connection or "
        "session closed",
        in_range(0, 3600, lo_open=True),
    )
    max_sessions: int = _opt(
        1000,
        "over HTTP, open sessions kept; past it a new session ends the one idle the longest",
        in_range(1, 1_000_000),
    )
    max_in_flight: int = _opt(
        64,
        "over HTTP, requests answered at once; past it 503, past an eighth of it on one "
        "session 429, past half of it on requests in no session (2026-07-28 clients) 503",
        in_range(1, 100_000),
    )
    warm_up: bool = _opt(
        True, "load the model and the store in the background at startup (never blocks a reply)"
    )


@dataclass(frozen=True)
class ServiceConfig:
    """`[service]`: the resident process that answers CLI memory commands and hooks warm."""

    enabled: bool = _opt(
        True, "hand `memory` commands, `brief` and hooks to a warm background process"
    )
    idle_seconds: float = _opt(
        600.0,
        "the service exits after this long without a request",
        in_range(0, None, lo_open=True),
    )
    wait_seconds: float = _opt(
        5.0,
        "how long a command waits for a busy or loading service before running in-process",
        in_range(0, None, lo_open=True),
    )


@dataclass(frozen=True)
class Config:
    """The whole configuration. Every field has a default: `Config()` is valid."""

    version: int = _opt(CONFIG_VERSION, "schema version of this file", in_range(1, None))
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)
    brief: BriefConfig = field(default_factory=BriefConfig)
    knowledge: KnowledgeConfig = field(default_factory=KnowledgeConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (lists for tuples), e.g. for JSON output."""
        plain: dict[str, Any] = _to_plain(self)
        return plain


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [_to_plain(v) for v in obj]
    return obj
