"""Streamable HTTP at `/mcp`: loopback by default, a bearer token for anything else.

One ASGI guard in front of the SDK's app does every check, in this order:
1. token (when configured): `Authorization: Bearer <token>`, compared in constant time; else 401;
2. Origin (when present): loopback origins plus `mcp.allowed_origins`; else 403 — a browser
   page elsewhere cannot drive the server (DNS rebinding);
3. Host (loopback binds): must be a loopback name or address (IPv6 in brackets) and an optional
   port of ASCII digits, nothing else; else 421;
4. method and session: at `/mcp` only GET, POST and DELETE, else 405 (with `Allow`) before any
   body is read; two different `mcp-session-id` headers, 400;
5. body size: a request body over `MAX_BODY_BYTES` (declared or streamed) gets 413 before the
   MCP app reads any of it; past `mcp.max_in_flight` MiB of bodies being read at once, 503
   (`bodies.py`);
6. shape: a body nested deeper than `wire.MAX_DEPTH`, or holding over `wire.MAX_VALUES`
   values, gets 400 before it is parsed. Both answer with a JSON-RPC error body, the same caps
   and answers as stdio (`wire.py`);
7. sessions: a request that opens one, with `mcp.max_sessions` open, first ends the session
   whose last request is the oldest (an open GET stream does not count: 503 only when every
   session has a request being answered);
8. requests in flight (`in_flight.py`): past `mcp.max_in_flight` POSTs being answered, 503;
   past an eighth of them on one session, 429; past half of them in no session (2026-07-28
   clients, which nothing tells apart: one peer address on loopback, one token for all), 503
   — so a flood of those leaves sessions half the places. A call whose client went away holds
   its place until its work ends (`abandoned.py`). A notification or an answer to the
   server's own request is never refused: the calls holding the places may be waiting for it.
No CORS headers are sent at all, so browsers keep their same-origin protection.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import re
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from octobrain.config.rules import BIND_RULE, MIN_TOKEN_CHARS, split_bind, token_problem
from octobrain.errors import InvalidInput, as_json, cut_middle
from octobrain.safe_text import client_text
from octobrain.server import wire
from octobrain.server.abandoned import SCOPE_KEY, Work, held_until_done
from octobrain.server.bodies import BodyBudget, Read, replay
from octobrain.server.in_flight import InFlight, is_request, place_of, request_id_of
from octobrain.server.quiet import QuietWarning

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MCP_PATH = "/mcp"
MCP_METHODS = ("GET", "POST", "DELETE")  # what the SDK serves there; anything else is 405
MAX_BODY_BYTES = wire.MAX_MESSAGE_BYTES
MAX_SESSIONS = 1000  # open sessions (`mcp.max_sessions`); at the cap the longest idle makes room
MAX_IN_FLIGHT = 64  # POSTs being answered at once (`mcp.max_in_flight`), shared out by `InFlight`
SESSION_IDLE_SECONDS = 1800.0  # a session without a request for this long is ended
# A Host header as RFC 9110 has it: a name or IPv4 address, or an IPv6 address in brackets, then
# an optional port of ASCII digits; anything else (`127.0.0.1:1@evil.com`, `localhost:evil`) is
# no loopback host, whatever precedes its last colon.
_HOST = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+))(?::[0-9]{1,5})?")


def is_loopback(host: str) -> bool:
    """Whether a bind or Host name is a loopback address (`[::1]` brackets allowed)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def parse_bind(bind: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 in brackets) → (host, port)."""
    found = split_bind(bind.strip())
    if found is None:
        raise InvalidInput("--bind", f"{BIND_RULE}, got {as_json(bind)}")
    host, port = found
    return host.strip("[]"), port


def check_token(host: str, token: str) -> None:
    """A non-loopback bind needs a token; a token must not be guessable, and must be one a
    client can send."""
    if token and len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput("--token", f"must be at least {MIN_TOKEN_CHARS} characters")
    if token and (problem := token_problem(token)) is not None:
        raise InvalidInput("--token", problem)  # else every request 401, without a word why
    if not token and not is_loopback(host):
        raise InvalidInput(
            "--token",
            f"required to bind {as_json(host)}, which is not a loopback address "
            "(pass --token or set OCTOBRAIN_TOKEN; clients send 'Authorization: Bearer <token>')",
        )


class Guard:
    """ASGI middleware: token, Origin and Host checks before the MCP app sees a request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        loopback: bool,
        allowed_origins: Sequence[str],
        sessions: Callable[[], dict[str, Any]] = dict,
        max_sessions: int | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.app = app
        self._token = token.encode()
        self._loopback = loopback
        self._origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.max_body = MAX_BODY_BYTES
        self.bodies = BodyBudget(max_in_flight * MAX_BODY_BYTES, MAX_BODY_BYTES)
        self.sessions = sessions  # session id → the SDK's transport, for the session cap
        self.max_sessions = max_sessions
        self.in_flight = InFlight(max_in_flight)
        self._last_request: dict[str, float] = {}  # session id → when its last POST ended
        self._refusals = QuietWarning(
            log,
            wire.REFUSALS_LOGGED,
            wire.REFUSALS_SECONDS,
            f"over {wire.REFUSALS_LOGGED} requests refused in {wire.REFUSALS_SECONDS:g} s: "
            "more are counted, not logged",
            "%d more requests were refused, not logged",
        )

    def _origin_ok(self, origin: str) -> bool:
        value = origin.rstrip("/").lower()
        if value in self._origins:
            return True
        # What a browser sends: scheme://host[:port], nothing else. urlsplit took
        # `http://evil.com\@127.0.0.1` for 127.0.0.1 (userinfo), where a browser goes to evil.com.
        scheme, sep, host = value.partition("://")
        return bool(sep) and scheme in ("http", "https") and self._host_ok(host)

    def _host_ok(self, host: str | None) -> bool:
        match = _HOST.fullmatch(host or "")
        return match is not None and is_loopback(match[1] or match[2])

    def _token_ok(self, authorization: str | None) -> bool:
        scheme, _, credentials = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode(), self._token
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        response: Response | None = None
        body = b""
        message: Any = None  # the body parsed, once it passed its checks
        if self._token and not self._token_ok(headers.get("authorization")):
            response = PlainTextResponse(
                "401: missing or wrong bearer token",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="octobrain"'},
            )
        elif twice := [name for name in ("origin", "host") if len(set(headers.getlist(name))) > 1]:
            # The checks below read the first; a proxy or browser extension in front may read
            # the last, so a second Origin (or Host) went past them unchecked.
            said = f"{twice[0]}: the request sends more than one; send the header once"
            response = PlainTextResponse(f"400: {said}", 400)
        elif (origin := headers.get("origin")) is not None and not self._origin_ok(origin):
            # The client's header, up to the ~100 kB a request's headers may hold: quoted cut
            # (JSON keeps it one line), in the answer and so in the log line below.
            shown = as_json(origin)
            response = PlainTextResponse(f"403: Origin {shown} is not allowed", 403)
        elif self._loopback and not self._host_ok(headers.get("host")):
            response = PlainTextResponse("421: Host must be a loopback name", 421)
        elif scope.get("path") == MCP_PATH and scope.get("method") not in MCP_METHODS:
            # Before the body is read: a PUT was read, then answered 400 "not JSON".
            said = f"{client_text(str(scope.get('method')))} is not served at {MCP_PATH}"
            allow = {"Allow": ", ".join(MCP_METHODS)}
            response = JSONResponse(wire.error(wire.INVALID_REQUEST, said), 405, headers=allow)
        elif len(set(headers.getlist("mcp-session-id"))) > 1:
            # The SDK and this guard read the first; whatever is in between may read another.
            said = "mcp-session-id: the request names more than one session; send the header once"
            response = JSONResponse(wire.error(wire.INVALID_REQUEST, said), 400)
        elif not (declared := headers.get("content-length", "0")).isdigit() or (
            int(declared) > self.max_body
        ):
            response = self._too_large()
        if response is None and scope.get("method") == "POST":
            body, read, why = await self.bodies.read(receive)
            body = wire.without_bom(body)  # (what the SDK reads is the replayed body)
            if read is Read.TOO_LARGE:
                response = self._too_large()
            elif read is Read.BUSY:
                busy = wire.error(wire.INTERNAL_ERROR, self.bodies.busy_message(why))
                # Closed after the answer: the unread body's buffers are let go with it.
                closing = {"Retry-After": "1", "Connection": "close"}
                response = JSONResponse(busy, 503, headers=closing)
            else:
                message, refused = wire.read_body(body)
                if refused is not None:
                    response = JSONResponse(refused, 400)
                else:
                    receive = replay(body, receive)
        post = scope.get("method") == "POST"
        session, pooled = place_of(headers) if post else (None, False)
        request_id = request_id_of(message)
        key = wire.request_key(request_id) if is_request(message) else None
        if response is None and post and self.in_flight.answering(session, key):
            response = JSONResponse(wire.duplicate_id(request_id), 400)
        if response is None and post:
            response = self.in_flight.refusal(session, pooled, message)
        if response is None and _opens_a_session(scope, headers):
            response = self._room_for_a_session()
        if response is not None:
            said = bytes(response.body).decode("utf-8", "replace")  # (not its b'…' repr)
            self._refusals.warn("refused %s %s: %s", scope.get("method"), scope.get("path"), said)
            await response(scope, receive, send)
            return
        if not post:
            await self.app(scope, receive, send)
            return
        self.in_flight.take(session, pooled, key)
        held = True
        work = Work() if key is not None else None
        if work is not None:
            scope[SCOPE_KEY] = work  # (the SDK's Request, and so the handler, shares `scope`)

        def release() -> None:
            nonlocal held
            if not held:
                return
            held = False
            self.in_flight.give_back(session, pooled, key)
            if session is not None and session in self.sessions():  # (not a made-up id: 404)
                self._last_request[session] = time.monotonic()

        async def answering(message: Message) -> None:
            # A place is free once the request's answer goes out, before the client can read
            # it: the SDK answers in an event stream it closes a moment later, and a client
            # sending its next call on the answer was refused 429 in between.
            if message["type"] == "http.response.body" and (
                not message.get("more_body", False)
                or _answers(message.get("body", b""), request_id)
            ):
                release()
            await send(message)

        try:
            await self.app(scope, receive, answering)
            if work is not None:  # a client that went away: its call's place until it ends
                await work.done()
        finally:
            release()

    def _room_for_a_session(self) -> Response | None:
        """Before a request that opens a session: at `max_sessions`, end the session whose
        last POST is the oldest (its client gets 404 and opens a new one, as after an idle
        timeout); with a POST being answered on every session, 503. The SDK's own cap refused
        every new session instead, so one local client that opened 10,000 and left them
        locked everyone out for 30 minutes. A GET stream left open keeps a session from its
        idle timeout, so it is not activity here: 1,000 sessions each holding one open locked
        every new client out as long as they were held."""
        sessions = self.sessions()
        now = time.monotonic()
        for known in [k for k in self._last_request if k not in sessions]:
            del self._last_request[known]  # ended sessions
        for key in sessions:  # a session not seen since it opened: from when it was first seen
            self._last_request.setdefault(key, now)
        if self.max_sessions is None or len(sessions) < self.max_sessions:
            return None
        # An ended session is cancelled; one with a POST being answered is busy.
        idle = [
            (self._last_request[key], t.idle_scope)
            for key, t in sessions.items()
            if t.idle_scope is not None
            and not t.idle_scope.cancel_called
            and key not in self.in_flight.by_session
        ]
        if not idle:
            return JSONResponse(wire.error(wire.INTERNAL_ERROR, "every session is busy"), 503)
        min(idle, key=lambda pair: pair[0])[1].cancel()  # as its idle timeout would
        return None

    def _too_large(self) -> Response:
        message = f"request body over {self.max_body} bytes; nothing was read"
        return JSONResponse(wire.error(wire.INVALID_REQUEST, message), 413)


def _answers(chunk: bytes, request_id: object) -> bool:
    """Whether a chunk of an event-stream response carries the answer (a result or an error)
    to the request `request_id` (None: no request, nothing answers it)."""
    if request_id is None or b"data:" not in chunk:
        return False
    for line in chunk.splitlines():
        if not line.startswith(b"data:"):
            continue
        try:
            message = json.loads(line[5:])
        except ValueError:
            continue
        if (
            isinstance(message, dict)
            and "method" not in message
            and ("result" in message or "error" in message)
            and message.get("id") == request_id
            and type(message.get("id")) is type(request_id)
        ):
            return True
    return False


def _opens_a_session(scope: Scope, headers: Headers) -> bool:
    """A POST the SDK serves by opening a session: one naming no session, and no protocol
    version or a handshake-era one (a 2026-07-28 request names its version and has none). A
    handshake version sent along with `initialize` opened sessions past the cap, unlimited."""
    version = headers.get("mcp-protocol-version")
    return (
        scope.get("method") == "POST"
        and "mcp-session-id" not in headers
        and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
    )


def http_app(
    server: Any,
    *,
    host: str,
    token: str,
    allowed_origins: Sequence[str] = (),
    max_sessions: int = MAX_SESSIONS,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> ASGIApp:
    """The guarded ASGI app serving `server` at `/mcp`."""
    from mcp.server.transport_security import TransportSecuritySettings

    check_token(host, token)
    inner = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        # The guard does the Host/Origin checks (with the configured extra origins).
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=SESSION_IDLE_SECONDS,
        # The guard's cap makes room instead of refusing; the SDK's, at twice it, is a backstop
        # for opens that pass the guard together.
        max_sessions=2 * max_sessions,
    )
    server.middleware.insert(0, held_until_done)
    manager = server.session_manager
    return Guard(
        inner,
        token=token,
        loopback=is_loopback(host),
        allowed_origins=allowed_origins,
        # The SDK keeps no public list of its sessions: this reads its registry.
        sessions=lambda: manager._server_instances,
        max_sessions=max_sessions,
        max_in_flight=max_in_flight,
    )


def listen(host: str, port: int) -> socket.socket:
    """The socket `--bind` names, listening: opened before the server starts anything, so a
    host that does not resolve or is not this machine's, or a port in use or not the user's
    to take, is refused naming `--bind` (exit 2), instead of uvicorn's own line after the
    server had said where it listens (exit 3)."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(
            "--bind", f"cannot listen on {cut_middle(shown, 100)}: {reason}"
        ) from None


def serve_http(
    server: Any,
    *,
    listener: socket.socket,
    host: str,
    token: str,
    allowed_origins: Sequence[str] = (),
    request_seconds: float = 30.0,
    unread_seconds: float = 30.0,
    max_sessions: int = MAX_SESSIONS,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> None:
    """Serve on `listener` (`listen`) until interrupted (uvicorn; its logs go to stderr)."""
    import uvicorn

    from octobrain.server.connections import BACKLOG, deadline_protocol

    app = http_app(
        server,
        host=host,
        token=token,
        allowed_origins=allowed_origins,
        max_sessions=max_sessions,
        max_in_flight=max_in_flight,
    )
    port = listener.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    log.info("octobrain MCP server on http://%s:%d/mcp", shown, port)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        http=deadline_protocol(request_seconds, unread_seconds),
        backlog=BACKLOG,
    )
    serving = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):
        serving.run(sockets=[listener])
    if not serving.started:  # as `uvicorn.run` ends a server that never started
        raise SystemExit(3)
