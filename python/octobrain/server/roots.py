"""Which project a session is locked to by its client's roots (or its session capability):
a handshake-era connection is sent `roots/list` once; a 2026-07-28 request, stateless, is
answered with an `InputRequiredResult` asking for them and read from its retry."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import REQUEST_TIMEOUT

from octobrain.server.scoping import (
    ScopeLock,
    Workspace,
    lock_from_capability,
    lock_from_roots,
    session_labels,
)

log = logging.getLogger(__name__)

ROOTS_TIMEOUT_SECS = 5.0
_ROOTS_KEY = "octobrain.roots_lock"
ROOTS_INPUT = "octobrain.roots"  # our key in a 2026-07-28 InputRequiredResult


class RootsRequired(Exception):
    """A 2026-07-28 request from a client with the roots capability, before it sent them."""


class _RootsLate(Exception):
    """`roots/list` was not answered in time: the call goes on unlocked by roots, but the
    session is not settled so (kept, one slow answer left it unlocked for good)."""


def ask_for_roots() -> types.InputRequiredResult:
    """Current-protocol roots: the call returns this, the client answers `roots/list` and
    retries the same call carrying the answer in `input_responses`."""
    return types.InputRequiredResult(input_requests={ROOTS_INPUT: types.ListRootsRequest()})


def _roots_answer(responses: types.InputResponses | None) -> types.ListRootsResult | None:
    answer = (responses or {}).get(ROOTS_INPUT)
    return answer if isinstance(answer, types.ListRootsResult) else None


def _connection_state(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    """Per-connection scratch space (`Connection.state`), None when the SDK hides it.

    `ServerRequestContext` exposes the connection only through its session; on the 2026 path
    every request gets a fresh connection, so this caches only on handshake connections.
    """
    connection = getattr(ctx.session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else None


async def session_scope_lock(
    ctx: ServerRequestContext[Any, Any],
    workspace: Workspace,
    responses: types.InputResponses | None = None,
    *,
    can_ask: bool = False,
) -> ScopeLock | None:
    """The scope this request's session is locked to, or None (capability, roots, cwd).

    Roots: a handshake-era connection is sent `roots/list` once; a 2026-07-28 request
    (stateless, so every call) raises `RootsRequired` when `can_ask` (the caller answers
    with an InputRequiredResult) and reads the roots from the retry's `responses`.
    """
    caps = ctx.session.client_capabilities
    experimental = caps.experimental if caps else None
    lock = lock_from_capability(experimental)
    if lock is not None:
        return lock
    state = _connection_state(ctx)
    if state is not None and _ROOTS_KEY in state:
        roots_lock: ScopeLock | None = state[_ROOTS_KEY]
    else:
        try:
            roots_lock = await _roots_lock(
                ctx, responses, can_ask=can_ask, here=not workspace.remote
            )
        except _RootsLate:  # not kept: the next call asks again
            roots_lock = None
        else:
            if state is not None:
                state[_ROOTS_KEY] = roots_lock  # asked once per connection; the lock holds
    lock = roots_lock or workspace.cwd_lock
    role, session_id = session_labels(experimental)  # (a capability naming no scope)
    if lock is not None and (role or session_id):
        lock = replace(lock, role=role, session_id=session_id)
    return lock


def session_id_of(ctx: ServerRequestContext[Any, Any], lock: ScopeLock | None) -> str:
    """The session id the client named (`experimental.session.session_id`), locked or not;
    "" when it named none."""
    if lock is not None:
        return lock.session_id
    caps = ctx.session.client_capabilities
    return session_labels(caps.experimental if caps else None)[1]


def role_of(ctx: ServerRequestContext[Any, Any], lock: ScopeLock | None) -> str:
    """The role the client named (`experimental.session.role`), locked or not; "" when it
    named none. The session's memories are that role's: a call cannot name another (a
    per-call role, as upstream takes one, would let any call read any role's memories)."""
    if lock is not None:
        return lock.role
    caps = ctx.session.client_capabilities
    return session_labels(caps.experimental if caps else None)[0]


async def _roots_lock(
    ctx: ServerRequestContext[Any, Any],
    responses: types.InputResponses | None,
    *,
    can_ask: bool,
    here: bool,
) -> ScopeLock | None:
    """The lock the client's roots give (`lock_from_roots`; `here`: the client is on this
    machine)."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.roots is None:
        return None
    if not ctx.session.can_send_request:  # 2026-07-28: no server-to-client requests
        answer = _roots_answer(responses)
        if answer is None:
            if can_ask:
                raise RootsRequired
            return None  # tools/list and the like cannot ask
        uris = [str(root.uri) for root in answer.roots]
        return await anyio.to_thread.run_sync(partial(lock_from_roots, uris, here=here))
    try:
        # Sent on this request's own stream, so it also works before an HTTP client has
        # opened the standalone GET stream. (ServerSession.list_roots is this, deprecated.)
        result = await ctx.session.send_request(
            types.ListRootsRequest(),
            types.ListRootsResult,
            request_read_timeout_seconds=ROOTS_TIMEOUT_SECS,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:  # a client slow to answer, not one that cannot
            log.warning("roots/list not answered in time; this call is not locked by roots")
            raise _RootsLate from exc
        log.warning("roots/list failed, not locking by roots: %s", exc)
        return None
    except Exception as exc:  # a client that cannot answer roots is simply not locked by them
        log.warning("roots/list failed, not locking by roots: %s", exc)
        return None
    uris = [str(root.uri) for root in result.roots]
    return await anyio.to_thread.run_sync(partial(lock_from_roots, uris, here=here))  # (git)
