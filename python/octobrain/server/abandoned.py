"""Requests whose HTTP client went away: their place among those in flight is kept until the
work they started has ended.

The guard frees a request's place when its POST ends. A POST whose client closes the
connection ends at once, but the SDK runs the request on (it is not cancelled), in a worker
thread nothing stops: a client that posted a call and hung up, again and again, had every
one of them queued and run, none counted. So the guard hands each request it passes on a
`Work` in the ASGI scope, the `held_until_done` middleware marks it started and ended around
the request's handler, and the guard keeps the place until then. A request whose client was
gone before its handler started is not run at all; one whose client goes while it runs is
cancelled, as a client's `notifications/cancelled` cancels it: a read waiting for its lock is
not run, an embedding stops at its next batch, nothing written, and a write under way (in its
worker thread, which cancelling does not stop) is finished (`stoppable`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

SCOPE_KEY = "octobrain.work"


@dataclass
class Work:
    """A request the guard passed on: its handler's cancel scope once it started, and when
    it ended."""

    gone: bool = False  # its POST ended (answered, or its client went away)
    ended: anyio.Event = field(default_factory=anyio.Event)
    handler: anyio.CancelScope | None = None  # its handler's, once that started

    async def done(self) -> None:
        """Its POST ended: cancel its handler if it still runs (the client went away before
        its answer), and wait until the work it started has ended."""
        self.gone = True
        if self.handler is not None:
            self.handler.cancel()  # (one that ended, its answer sent, is not touched)
            await self.ended.wait()


async def held_until_done(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware (outermost): mark the request's `Work` (HTTP only) started and ended
    around its handler; a request whose POST ended before it started is refused, undone."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR

    scope = getattr(ctx.request, "scope", None)
    work = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(work, Work):
        return await call_next(ctx)
    if work.gone:
        raise MCPError(INTERNAL_ERROR, "the client closed the connection first; nothing was done")
    try:
        with anyio.CancelScope() as work.handler:
            return await call_next(ctx)
        raise MCPError(INTERNAL_ERROR, "the client closed the connection; the call was stopped")
    finally:
        work.ended.set()
