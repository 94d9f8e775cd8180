"""Requests whose HTTP client went away: their place among those in flight is kept until the
work they started has ended.

The guard frees a request's place when its POST ends. A POST whose client closes the
connection ends at once, but the SDK runs the request on (it is not cancelled), in a worker
thread nothing stops: a client that posted a call and hung up, again and again, had every
one of them queued and run, none counted. So the guard hands each request it passes on a
`Work` in the ASGI scope, the `held_until_done` middleware marks it started and ended around
the request's handler, and the guard keeps the place until then. A request whose client was
gone before its handler started is not run at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

SCOPE_KEY = "octobrain.work"


@dataclass
class Work:
    """A request the guard passed on: whether its handler started, and when it ended."""

    started: bool = False
    gone: bool = False  # its POST ended (answered, or its client went away)
    ended: anyio.Event = field(default_factory=anyio.Event)

    async def done(self) -> None:
        """Its POST ended: wait until the work its handler started has ended."""
        self.gone = True
        if self.started:
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
    work.started = True
    try:
        return await call_next(ctx)
    finally:
        work.ended.set()
