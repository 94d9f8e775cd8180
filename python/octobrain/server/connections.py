"""The HTTP server's connections: how long a request may take to arrive, and how many
connections may be open at once.

uvicorn waits for a request's headers and body for as long as the client likes, and the token
is checked only once the headers are complete, so a client that opens connections and never
finishes a request would hold them, and their file descriptors, for good. So each request must
arrive within `mcp.request_seconds` (`deadline_protocol`). Within those seconds a client can
still open connections faster than they expire: 19,000 half-sent requests from one local
process took the server to 19,016 of its 20,000 descriptors, after which no client could
connect and the store could not open its files. So connections are also capped below the
descriptors the process may open (`connection_cap`), and a connection past the cap makes room
by closing the one that has waited longest for its request (an idle kept-alive connection
included), as the body budget drops the largest body (`bodies`): a flood of connections that
send nothing cannot keep out a client that sends its request at once.

An answer has no deadline, but its client must read it: uvicorn waits for a client that reads
nothing for as long as it stays connected (it has no write timeout), holding the connection,
its task and the answer's unsent bytes, and a connection being answered is never closed to make
room, so clients that sent requests (pipelined on one connection, so the answers pile up past
the kernel's buffers) and read none of the answers held every connection the server may open.
So an answer that has not moved for `mcp.unread_seconds` is dropped: its connection is
closed, one line in the log.

A request's line and headers are at most `HEAD_BYTES` together, however they arrive: h11 measures
them only while they are incomplete, so 60 KB sent in one write were taken whole and 20 KB sent
a kilobyte at a time were refused, both ways with `400 Invalid HTTP request received.`. Past it
the answer is 431 naming the rule. A request giving both a Content-Length and a
Transfer-Encoding was read by its chunks, its connection kept: 400 naming both, and closed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from octobrain.server.quiet import QuietWarning

log = logging.getLogger(__name__)

# Descriptors kept for everything else the server opens (the store's files, the model, the
# log): a quarter of what it may open, and at least this many.
RESERVED_FILES = 256
# The listen queue, and so the most connections asyncio accepts in one go before any of them
# is counted (uvicorn's default, 2,048, took a server allowed 512 descriptors past them): kept
# free beside the reserve.
BACKLOG = 128
# The most bytes a request's line and headers take together (h11's own default).
HEAD_BYTES = 16 * 1024


def connection_cap() -> int:
    """How many connections may be open at once: the descriptors this process may open
    (`RLIMIT_NOFILE`, soft), less what is kept for the rest (`RESERVED_FILES`) and for the
    connections accepted in one go (`BACKLOG`)."""
    try:
        import resource
    except ImportError:  # (no such limit to read: a platform without the module)
        return 4096
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > 1 << 20:
        soft = 1 << 20
    return max(16, soft - max(RESERVED_FILES, soft // 4) - BACKLOG)


def deadline_protocol(seconds: float, unread: float, cap: int | None = None) -> type[Any]:
    """uvicorn's h11 protocol with a deadline on each request's arrival, and at most `cap`
    connections (`connection_cap()` when None).

    The headers and the whole body must arrive within `seconds` of the connection opening (or
    of the previous answer, on a kept-alive connection); past that the connection is closed.
    The answer itself (a long tool call, an event stream) has no deadline, but one its client
    leaves unread for `unread` seconds is dropped and its connection closed. A connection that
    takes the count past `cap` closes the one waiting longest for its request, or itself when
    every other is being answered.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadCapped(h11.Connection):
        """h11's server side, refusing a request whose line and headers pass `HEAD_BYTES`
        whether or not they arrived in one piece, or one framing its body twice;
        `refusal` says why it refused (status, text)."""

        refusal: tuple[int, str] | None = None

        def next_event(self) -> Any:
            try:
                event = super().next_event()
            except h11.RemoteProtocolError as exc:
                if exc.error_status_hint == 431:  # (over the cap, incomplete)
                    self.refusal = 431, _TOO_LONG
                raise
            if isinstance(event, h11.Request) and _head_bytes(event) > HEAD_BYTES:
                self.refusal = 431, _TOO_LONG
                raise h11.RemoteProtocolError("request headers too long", 431)
            if isinstance(event, h11.Request) and _framed_twice(event):
                # h11 reads the chunks and keeps the connection; a proxy in front reading the
                # length instead would take the rest of the body for another request (request
                # smuggling). RFC 9112 (6.1) lets a server refuse it; it must close after.
                self.refusal = 400, _FRAMED_TWICE
                raise h11.RemoteProtocolError("Content-Length and Transfer-Encoding", 400)
            return event

    most = connection_cap() if cap is None else cap
    # uvicorn's own warnings, one per malformed request (`Invalid HTTP request received.`),
    # two per websocket upgrade asked: 2,000 of them filled the 64 kB pipe a launcher reads
    # stderr from, and the server, blocked writing, answered nobody.
    malformed = QuietWarning(
        logging.getLogger("uvicorn.error"),
        20,
        10.0,
        "over 20 warnings of malformed requests in 10 s: more are counted, not logged",
        "%d more warnings of malformed requests were not logged",
    )
    # The connections waiting for a request, the one waiting longest first (dicts keep their
    # insertion order: `_arm` puts a connection last).
    waiting: dict[Any, None] = {}
    # Once, then once a minute at most, with how many since: a flood of connections is not
    # logged line by line.
    closed = QuietWarning(log, 1, 60.0, "", "%d more connection(s) were closed to make room")
    dropped = QuietWarning(
        log,
        20,
        60.0,
        "over 20 answers dropped in 60 s: more are counted, not logged",
        "%d more answers were dropped, not logged",
    )

    class DeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _armed_cycle: object = None  # the request cycle there was when the deadline was set
        _stalled: asyncio.TimerHandle | None = None  # set while the answer cannot be written

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head = HeadCapped(h11.SERVER, max_incomplete_event_size=HEAD_BYTES)
            self.conn = self._head
            self.logger = QuietLog(self.logger, malformed)  # type: ignore[assignment]

        def send_400_response(self, msg: str) -> None:
            if self._head.refusal is None:
                super().send_400_response(msg)
                return
            status, text = self._head.refusal
            said = f"{status}: {text}".encode()
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(said)).encode()),
                (b"connection", b"close"),
            ]
            for event in (h11.Response(status_code=status, headers=headers), h11.Data(data=said)):
                self.transport.write(self.conn.send(event))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > most:
                oldest = next((c for c in waiting if c is not self), self)
                oldest._close()
                closed.warn(
                    "a connection waiting for its request closed to make room: at most %d are "
                    "open at once (of the descriptors the server may open, a quarter is kept "
                    "for its store and model)",
                    most,
                )

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._moved()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            super().pause_writing()  # the client has not read what was written so far
            if self._stalled is None:
                self._stalled = self.loop.call_later(unread, self._drop_answer)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._moved()

        def _moved(self) -> None:
            if self._stalled is not None:
                self._stalled.cancel()
                self._stalled = None

        def _drop_answer(self) -> None:
            self._moved()
            peer = self.client
            dropped.warn(
                "an answer to %s was dropped and its connection closed: its client left it "
                "unread for %g s (mcp.unread_seconds)",
                f"{peer[0]}:{peer[1]}" if peer else "a client",
                unread,
            )
            self.transport.abort()  # (`close` would wait for the unread bytes to be written)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets its own deadline

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if cycle is not None and cycle is not self._armed_cycle and not cycle.more_body:
                self._disarm()  # this request arrived whole: its answer may take its time

        def _arm(self) -> None:
            self._disarm()
            self._armed_cycle = self.cycle
            self._deadline = self.loop.call_later(seconds, self._close)
            waiting[self] = None

        def _disarm(self) -> None:
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _close(self) -> None:
            self._disarm()
            if self.transport.get_write_buffer_size():
                self._drop_answer()  # its last answer unread: `close` waits to write it all
            elif not self.transport.is_closing():
                self.transport.close()

    return DeadlineProtocol


_TOO_LONG = f"the request line and headers are at most {HEAD_BYTES} bytes"
_FRAMED_TWICE = "the request sends both Content-Length and Transfer-Encoding; send one"


def _framed_twice(request: Any) -> bool:
    """Whether an h11 request names its body's length both ways."""
    names = {name for name, _ in request.headers}
    return b"content-length" in names and b"transfer-encoding" in names


def _head_bytes(request: Any) -> int:
    """The bytes of an h11 request's line and headers as sent (each line with its CRLF)."""
    line = len(request.method) + len(request.target) + len(request.http_version) + 9
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items())


class QuietLog:
    """uvicorn's logger for a connection, its warnings said through a `QuietWarning`; the rest
    (errors, the level it reads) as they are."""

    def __init__(self, log: logging.Logger, warnings: QuietWarning) -> None:
        self._log, self._warnings = log, warnings

    def warning(self, message: str, *args: object) -> None:
        self._warnings.warn(message, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)
