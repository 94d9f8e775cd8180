"""`mark_stale`: search hits of local files that changed or went away since they were indexed.

A search over every source answers from the index, not the files (reading them all again
would be unbounded work): a hit of a file edited or deleted since was shown as its text,
as if current. Each file a reply cites is looked at once (a `stat`, at most one a hit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput
from octobrain.knowledge.results import KnowledgeHit
from octobrain.knowledge.sources import SourceKind, confine, file_mtime, parse_source
from octobrain.store.sql import sql_in

if TYPE_CHECKING:
    from octobrain.knowledge.store import KnowledgeStore

CHANGED = "changed"  # the file's modification time is not the one indexed
GONE = "gone"  # the file cannot be read any more


def mark_stale(
    kstore: KnowledgeStore,
    hits: Sequence[KnowledgeHit],
    where: str,
    roots: tuple[Path, ...] | None,
) -> list[KnowledgeHit]:
    """`hits` with `stale` set for those of a local file (outside session notes) whose file
    changed or is gone since it was indexed; `where` selects the source rows the caller sees,
    and a file outside `roots` (None: anywhere) is not looked at."""
    files = {h.uri for h in hits if not h.session and h.uri.startswith("file://")}
    if not files:
        return list(hits)
    rows = kstore.scan_sources(f"({where}) AND session_id = '' AND {sql_in('uri', sorted(files))}")
    indexed = {(r["uri"], r["scope"]): float(r["mtime"]) for r in rows}
    state: dict[tuple[str, str], str] = {}
    for key, mtime in indexed.items():
        try:
            ref = confine(parse_source(key[0]), roots)
        except InvalidInput:
            continue  # not this session's to look at
        if ref.kind is not SourceKind.FILE:
            continue
        now = file_mtime(ref)
        state[key] = GONE if now is None else CHANGED if now != mtime else ""
    return [
        dataclasses.replace(h, stale=state.get((h.uri, h.scope), "")) if not h.session else h
        for h in hits
    ]
