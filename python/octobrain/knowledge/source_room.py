"""How many sources one project's knowledge index holds: each file or URL indexed is bounded
(`max_source_bytes`, `max_source_chunks`), but without a count a client naming `?v=1`, `?v=2`,
… of one URL (each a source of its own) grows the store without end. A new source past
`knowledge.max_sources` is refused, naming the setting and the way out (delete sources);
one already indexed is always indexed again."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput
from octobrain.store.sql import sql_str

if TYPE_CHECKING:
    from octobrain.config.schema import KnowledgeConfig
    from octobrain.knowledge.store import KnowledgeStore


def check_source_room(
    kstore: KnowledgeStore, scope: str, uri: str, config: KnowledgeConfig
) -> None:
    """`InvalidInput` when `scope` already holds `max_sources` indexed sources (session notes
    not counted: they have caps of their own) and `uri` is not one of them. A count of rows,
    no text read: called before the source is fetched, and again under the write lock of its
    commit, where N new sources indexed at once are counted one after another."""
    where = f"scope = {sql_str(scope)} AND session_id = ''"
    held = int(kstore.sources.count_rows(where))
    if held < config.max_sources or kstore.sources.count_rows(f"{where} AND uri = {sql_str(uri)}"):
        return
    whose = "the global knowledge index" if scope == "" else "this project's knowledge index"
    flag = "--global" if scope == "" else f"--scope {shlex.quote(scope)}"
    raise InvalidInput(
        "source",
        f"{whose} already holds {held:,} source{'s' * (held != 1)}, the most "
        f"knowledge.max_sources ({config.max_sources:,}) allows, so {uri} was not indexed; "
        f"delete sources it no longer needs (`octobrain knowledge {flag} delete-source "
        f"SOURCE`; `octobrain knowledge {flag} list` names them), or raise the setting",
    )
