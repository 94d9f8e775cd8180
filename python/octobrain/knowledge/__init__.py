"""Knowledge: index, search, read and grep external documents (files, URLs) and session notes.

`Knowledge` is the facade; `run_command` is the MCP tool's logic; `render` formats results.
Importing this package loads no parser, HTTP client or database: they load on first use.
"""

from octobrain.knowledge.results import (
    IndexReport,
    KnowledgeHit,
    KnowledgeStats,
    LineHit,
    MatchReport,
    SearchResult,
    SourceInfo,
    StoredNote,
)
from octobrain.knowledge.service import Knowledge
from octobrain.knowledge.tool import COMMANDS, run_command

__all__ = [
    "COMMANDS",
    "IndexReport",
    "Knowledge",
    "KnowledgeHit",
    "KnowledgeStats",
    "LineHit",
    "MatchReport",
    "SearchResult",
    "SourceInfo",
    "StoredNote",
    "run_command",
]
