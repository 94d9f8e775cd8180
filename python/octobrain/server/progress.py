"""A call's long work told to its MCP client as it goes: `notifications/progress` against the
`progressToken` the client put in the call's `_meta` (nothing is sent without one).

Embedding a source runs in a worker thread (`stoppable.in_thread`), holding the knowledge lock,
and reports after each batch (`generation.embed_rows`). The thread only hands its count to the
event loop, where one task sends it: the thread waited for each notification to be written,
so a client that stopped reading its output (a full pipe) held the lock for good, and every
other session's knowledge call with it. A count reported while the one before is still being
written replaces any not yet sent, so the notifications arrive in order, their `progress`
increasing, and the last is sent before the answer.

Each notification carries the token back: a token over `PROGRESS_TOKEN_BYTES` is refused (MCP
lets a token be any string or integer; a 900 kB one came back in every notification).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

from octobrain.errors import InvalidInput
from octobrain.safe_text import byte_len

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from octobrain.knowledge.generation import Progress

log = logging.getLogger(__name__)

PROGRESS_TOKEN_BYTES = 256  # a request id or a UUID is tens of bytes


class _Told:
    """The latest count not yet sent, and the task that sends it."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx
        self._latest: tuple[int, int] | None = None
        self._wake = anyio.Event()
        self._finished = False

    def report(self, done: int, total: int) -> None:
        """From the work's thread: hand over the count, without waiting for it to be sent."""
        try:
            anyio.from_thread.run_sync(self._offer, done, total)
        except Exception:  # (never fails the work it reports on: the call is ending)
            log.debug("progress %d/%d not sent", done, total, exc_info=True)

    def _offer(self, done: int, total: int) -> None:
        self._latest = (done, total)
        self._wake.set()

    def finish(self) -> None:
        """No more counts: the sender ends once the last is sent."""
        self._finished = True
        self._wake.set()

    async def send_all(self) -> None:
        while True:
            if self._latest is None:
                if self._finished:
                    return
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            (done, total), self._latest = self._latest, None
            try:
                await self._ctx.session.report_progress(done, total)
            except Exception:  # (the client gone: the work goes on, or stops at its next batch)
                log.debug("progress %d/%d not sent", done, total, exc_info=True)


@asynccontextmanager
async def progress_of(ctx: ServerRequestContext[Any, Any]) -> AsyncIterator[Progress | None]:
    """A `progress(done, total)` for work of this request in a worker thread of its event loop
    that tells the client, or None when the client asked for no progress. On leaving, the
    last count is sent (a client not reading holds this request, not the work's locks)."""
    token = progress_token_from_params(ctx.params)
    if token is None:
        yield None
        return
    size = byte_len(str(token))
    if size > PROGRESS_TOKEN_BYTES:
        raise InvalidInput(
            "_meta.progressToken",
            f"{size:,} bytes, over the {PROGRESS_TOKEN_BYTES} this server sends back in each "
            "progress notification; send a shorter token, or none for no progress",
        )
    told = _Told(ctx)
    async with anyio.create_task_group() as group:
        group.start_soon(told.send_all)
        try:
            yield told.report
        finally:
            told.finish()
