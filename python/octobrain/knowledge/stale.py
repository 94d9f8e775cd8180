"""`mark_stale`: search hits of local files that changed or went away since they were indexed.

A search over every source answers from the index, not the files (reading them all again
would be unbounded work): a hit of a file edited or deleted since was shown as its text,
as if current. Each file a reply cites is looked at once (a `stat`, at most one a hit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.knowledge.results import KnowledgeHit
from octobrain.knowledge.sources import SourceKind, confine, file_mtime, parse_source

CHANGED = "changed"  # the file's modification time is not the one indexed
GONE = "gone"  # the file cannot be read any more


def mark_stale(
    sources: Iterable[Mapping[str, Any]],
    hits: Sequence[KnowledgeHit],
    roots: tuple[Path, ...] | None,
) -> list[KnowledgeHit]:
    """`hits` with `stale` set for those of a local file (outside session notes) whose file
    changed or is gone since it was indexed. `sources`: the light source rows the index
    mirror holds (`ChunkIndex.sources`), whose `mtime` is the one indexed: reading them from
    the table instead cost a search 19 ms of its 20. A file outside `roots` (None: anywhere)
    is not looked at."""
    files = {h.uri for h in hits if not h.session and h.uri.startswith("file://")}
    if not files:
        return list(hits)
    indexed = {
        (r["uri"], r["scope"]): float(r["mtime"])
        for r in sources
        if r["uri"] in files and r["session_id"] == ""
    }
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
