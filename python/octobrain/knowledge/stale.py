"""`mark_stale`, `mark_stale_lines`: search hits and matching lines of local files that changed
or went away since they were indexed.

A search or match over every source answers from the index, not the files (reading them all
again would be unbounded work): a hit of a file edited or deleted since was shown as its text,
as if current. Each file a reply cites is looked at once (a `stat`, at most one a hit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.knowledge.results import KnowledgeHit, LineHit
from octobrain.knowledge.sources import (
    SourceKind,
    SourceRef,
    file_version,
    indexed_version,
    parse_source,
)

CHANGED = "changed"  # the file's modification time or size is not the one indexed
GONE = "gone"  # the file cannot be read any more

# The session's check of a local file it may look at (`KnowledgeBase._confined`): the file,
# or `InvalidInput` when it is outside the session's roots or one of octobrain's own.
Confine = Callable[[SourceRef], SourceRef]


def file_states(
    sources: Iterable[Mapping[str, Any]], uris: set[str], confine: Confine
) -> dict[tuple[str, str], str]:
    """For each persistent source row (uri, scope) whose uri is in `uris` and a local file
    `confine` lets the session look at: `CHANGED` or `GONE` when the file changed or went away
    since it was indexed (the row's `mtime` and `size_bytes`), else "". One `stat` a file."""
    indexed = {
        (r["uri"], r["scope"]): indexed_version(r)
        for r in sources
        if r["uri"] in uris and r["uri"].startswith("file://") and r["session_id"] == ""
    }
    state: dict[tuple[str, str], str] = {}
    for key, version in indexed.items():
        try:
            ref = confine(parse_source(key[0]))
        except InvalidInput:
            continue  # not this session's to look at
        if ref.kind is not SourceKind.FILE:
            continue
        now = file_version(ref)
        state[key] = GONE if now is None else CHANGED if now != version else ""
    return state


def mark_stale(
    sources: Iterable[Mapping[str, Any]],
    hits: Sequence[KnowledgeHit],
    confine: Confine,
) -> list[KnowledgeHit]:
    """`hits` with `stale` set for those of a local file (outside session notes) whose file
    changed or is gone since it was indexed. `sources`: the light source rows the index
    mirror holds (`ChunkIndex.sources`), whose `mtime` and size are the ones indexed: reading
    them from the table instead cost a search 19 ms of its 20. A file `confine` refuses
    (outside the session's roots, or octobrain's own) is not looked at."""
    files = {h.uri for h in hits if not h.session}
    if not files:
        return list(hits)
    state = file_states(sources, files, confine)
    return [
        dataclasses.replace(h, stale=state.get((h.uri, h.scope), "")) if not h.session else h
        for h in hits
    ]


def mark_stale_lines(
    rows: Sequence[Mapping[str, Any]], hits: Sequence[LineHit], confine: Confine
) -> list[LineHit]:
    """Matching lines of indexed text (`knowledge match` over the index), `stale` set as
    `mark_stale` sets it, from the source `rows` grepped. A file indexed in two scopes is
    marked when either row is stale (its lines are shown once, under its uri)."""
    state: dict[str, str] = {}
    for (uri, _), said in file_states(rows, {h.uri for h in hits}, confine).items():
        state[uri] = state.get(uri) or said
    return [dataclasses.replace(h, stale=state.get(h.uri, "")) for h in hits]
