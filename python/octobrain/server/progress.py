"""A call's long work told to its MCP client as it goes: `notifications/progress` against the
`progressToken` the client put in the call's `_meta` (nothing is sent without one).

Embedding a source runs in a worker thread (`stoppable.in_thread`) and reports after each batch
(`generation.embed_rows`); each report is sent from the event loop before the next batch starts,
so the notifications arrive in order, their `progress` increasing, all before the answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio.from_thread
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from octobrain.knowledge.generation import Progress

log = logging.getLogger(__name__)


def progress_of(ctx: ServerRequestContext[Any, Any]) -> Progress | None:
    """A `progress(done, total)` for work of this request in a worker thread of its event loop
    that tells the client, or None when the client asked for no progress. A notification that
    cannot be sent (the client gone) is dropped; the work goes on, or stops at its next batch
    when its call was cancelled."""
    if progress_token_from_params(ctx.params) is None:
        return None

    def report(done: int, total: int) -> None:
        try:
            anyio.from_thread.run(ctx.session.report_progress, done, total)
        except Exception:  # (never fails the work it reports on)
            log.debug("progress %d/%d not sent", done, total, exc_info=True)

    return report
