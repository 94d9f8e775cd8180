"""POSTs being answered over HTTP, and whether another may be: refused, never queued.

Each waiting call holds its parsed arguments (one client with 120 ingests at once took 1 GB and
kept every other client waiting for a minute), so there are three caps:
- `mcp.max_in_flight` (64) in all: past it, 503;
- an eighth of them on one MCP session: past it, 429;
- half of them, together, for requests in no session: past it, 503. A 2026-07-28 client sends no
  `Mcp-Session-Id`, and nothing it does send tells one such client from another: every loopback
  client has the same peer address (so does every client behind one proxy), a configured token
  is one token that every client sends, and the client info in `_meta` is whatever the client
  says it is. So these requests share one pool, and a flood of them leaves the other half of
  the places to clients with sessions (one client's 64 slow calls got everyone else 503).
A request the SDK answers outside any session is counted in the pool whatever session id it
names: a 2026-07-28 request is served without one, and a made-up id on each got each its own
eighth, past the pool.

Only a request is refused: a notification (a cancel) or the client's answer to the server's own
request (`roots/list`, which the calls holding the places wait on) is taken at once, as it frees
places rather than waiting for one.
"""

from __future__ import annotations

from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

from octobrain.server import wire


def place_of(headers: Headers) -> tuple[str | None, bool]:
    """Where a POST is counted: the MCP session it names, and whether it is in the pool of
    requests in no session. A request naming a protocol version the SDK serves without
    sessions (2026-07-28) is in the pool, whatever session id it names (the SDK ignores it);
    a handshake-era one naming no session opens one (`Guard._room_for_a_session`)."""
    version = headers.get("mcp-protocol-version")
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None, True
    return headers.get("mcp-session-id"), False


def is_request(message: Any) -> bool:
    """Whether a body (parsed, `wire.read_body`) holds a request, which is answered later,
    rather than a notification or a response, which are not."""
    return isinstance(message, dict) and "method" in message and message.get("id") is not None


def request_id_of(message: Any) -> object:
    """The JSON-RPC id of a one-request body (parsed, `wire.read_body`), else None."""
    request_id = message.get("id") if isinstance(message, dict) else None
    usable = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if usable else None


class InFlight:
    """The POSTs being answered: in all, per session, and in no session."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.per_session = max(1, most // 8)
        self.sessionless_most = max(1, most // 2)
        self.total = 0
        self.sessionless = 0
        self.by_session: dict[str, int] = {}
        self._ids: dict[str, set[object]] = {}  # session → request ids being answered

    def answering(self, session: str | None, key: object) -> bool:
        """Whether `session` has a request with this id (`wire.request_key`) being answered."""
        return session is not None and key is not None and key in self._ids.get(session, ())

    def refusal(self, session: str | None, pooled: bool, message: Any) -> Response | None:
        """The answer refusing `message` (`place_of` its POST) a place, or None."""
        if not is_request(message):
            return None
        if self.total >= self.most:
            status = 503
            said = (
                f"the server is answering {self.total} requests, its most "
                "(mcp.max_in_flight); retry shortly"
            )
        elif pooled and self.sessionless >= self.sessionless_most:
            status = 503
            said = (
                f"the server is answering {self.sessionless} requests that name no MCP session, "
                "the most it answers at once for all such clients together (half of "
                "mcp.max_in_flight; the rest is kept for sessions); retry shortly"
            )
        elif session is not None and self.by_session.get(session, 0) >= self.per_session:
            status = 429
            said = (
                f"this session has {self.per_session} requests being answered, its most; "
                "send more as answers arrive"
            )
        else:
            return None
        answer = wire.error(wire.INTERNAL_ERROR, said, request_id_of(message))
        return JSONResponse(answer, status, headers={"Retry-After": "1"})

    def take(self, session: str | None, pooled: bool, key: object) -> None:
        """Count a POST being answered (`place_of` it; `key`: its request's, None for none)."""
        self.total += 1
        self.sessionless += pooled
        if session is None:
            return
        self.by_session[session] = self.by_session.get(session, 0) + 1
        if key is not None:
            self._ids.setdefault(session, set()).add(key)

    def give_back(self, session: str | None, pooled: bool, key: object) -> None:
        """The place `take` counted, once its answer is out."""
        self.total -= 1
        self.sessionless -= pooled
        if session is None:
            return
        left = self.by_session.pop(session) - 1
        if left:
            self.by_session[session] = left
        ids = self._ids.get(session)
        if ids is not None:
            ids.discard(key)
            if not ids:
                del self._ids[session]
