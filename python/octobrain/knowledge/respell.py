"""The knowledge tables' scopes an earlier version spelt otherwise, brought to the spelling
derived now, once (as `store.respell` does for memories): a document indexed in
`github.com./acme/api` was searched by no checkout since that remote's scope became
`github.com/acme/api`.

A source's id is made from its scope (`store.source_id`), so a source moves to the id of its
new scope: its row written under that id (same generation, one commit), its chunks given that
id and scope (one commit), the former row deleted (one commit). Each step leaves a row naming
the chunks' generation, so none is ever swept as an orphan, and a pass cut short is finished by
the next. A source indexed since under the new scope (another generation) is the document as
it is now: the former one is deleted, as indexing it again would have.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from octobrain.store import manifest
from octobrain.store.respell import (
    SPELLING,
    record_moves,
    respelt_rows,
    scope_moves,
    when_due,
)
from octobrain.store.scans import scan_arrow
from octobrain.store.schema import CHECKSUM, CHUNK_CHECKED, chunk_checksum, source_checksum
from octobrain.store.sql import sql_in, sql_str

if TYPE_CHECKING:
    from octobrain.knowledge.store import KnowledgeStore

log = logging.getLogger(__name__)

SPELT = manifest.KNOWLEDGE_SCOPES_SPELT
SourceId = Callable[[str, str, str], str]  # (uri, scope, session) → the source's id


def bring_up(kstore: KnowledgeStore, source_id: SourceId) -> None:
    """Respell the knowledge tables' scopes if an earlier version wrote them (a store that
    cannot be written is read as it is, with a warning); `source_id` makes a source's id."""
    when_due(kstore.location, SPELT, lambda: respell(kstore, source_id), "knowledge scopes")


def respell(kstore: KnowledgeStore, source_id: SourceId) -> dict[str, str]:
    """Under the knowledge write lock: each source (and its chunks) whose scope reads as another
    now moved to that scope; returns {former spelling: scope} of this pass."""
    with kstore.write_lock():
        if (manifest.read(kstore.location) or {}).get(SPELT) == SPELLING:
            return {}
        moves = scope_moves(kstore.sources)
        record_moves(kstore.location, moves)
        sources = scan_arrow(kstore.sources, sql_in("scope", list(moves)), None, None)
        for row in sources.to_pylist():
            new = moves.get(row["scope"], row["scope"])
            _move(kstore, row, new, source_id(row["uri"], new, row["session_id"]))
        manifest.note(kstore.location, SPELT, SPELLING)
    return moves


def _move(kstore: KnowledgeStore, row: dict[str, Any], scope: str, sid: str) -> None:
    present = kstore.sources.search().where(f"id = {sql_str(sid)}").select(["generation"])
    there = present.limit(1).to_list()
    if there and there[0]["generation"] != row["generation"]:
        kstore.delete_sources([row["id"]])  # (indexed again since, under the new scope)
        return
    if not there:
        moved = {**row, "id": sid, "scope": scope}
        moved[CHECKSUM] = source_checksum(moved)
        kstore.location.check_held()
        kstore.sources.merge_insert("id").when_not_matched_insert_all().execute([moved])
        kstore.wrote(kstore.sources)
    _rewrite_chunks(kstore, row["id"], scope, sid)
    kstore.location.check_held()
    kstore.sources.delete(f"id = {sql_str(row['id'])}")
    kstore.wrote(kstore.sources)


def _rewrite_chunks(kstore: KnowledgeStore, former: str, scope: str, sid: str) -> None:
    """The chunks of source `former` given source `sid` and `scope`, and their checksums."""
    where = f"source_id = {sql_str(former)}"
    rows = scan_arrow(kstore.chunks, where, list(CHUNK_CHECKED), None).to_pylist()
    if not rows:
        return
    moved = ({**row, "source_id": sid, "scope": scope} for row in rows)
    data = respelt_rows(moved, ["source_id", "scope"], chunk_checksum)
    kstore.location.check_held()
    kstore.chunks.merge_insert("id").when_matched_update_all().execute(data)
    kstore.wrote(kstore.chunks)
