"""Reading HTTP request bodies in the guard, with a bound on the bytes held across them.

A body is read whole before the MCP app sees it (its size and nesting are checked first), and
every connection may be sending one: 1,500 connections each sending 1 MB and stopping short
took the server from 311 MB to 1.78 GB in two seconds, held until `mcp.request_seconds`
closed them, with nothing stopping 20,000 of them. So the bytes of the bodies being read are
counted together (`BodyBudget`), as they arrive. A chunk that would take the count past the
budget first drops bodies still not whole to make room: those that began over `OLD_SECONDS`
ago, oldest first, then those holding more than its own body will, largest first (their
bytes let go at once, their connections answered 503), and is refused 503 itself when that
would not be enough. Counting a body's declared length instead, before a byte arrived, let
64 connections that each declared 1 MiB and sent nothing lock every other client out until
the request deadline closed them; with only stalled bodies giving way, connections that each
kept sending a large body, a new one as each was refused, refused every other client for as
long as they went on. The largest give way as a proxy's overload manager resets the streams
buffering the most (Envoy's `reset_high_memory_stream`): a flood must hold its room in bodies
smaller than the request it would keep out, a tools/call of a few hundred bytes, which takes
more connections than the server has descriptors. A share per client address would not do:
every local client is 127.0.0.1, and a local process may send from any of 127.0.0.0/8. Once
read, a request's place among those answered (`mcp.max_in_flight`) bounds what it holds.
"""

from __future__ import annotations

import time
from enum import Enum

from starlette.types import Message, Receive

OLD_SECONDS = 1.0  # a body still arriving after this gives way to any other when room runs out


class Read(Enum):
    """How reading a body ended."""

    WHOLE = "whole"
    TOO_LARGE = "too large"  # past the size one message may have
    BUSY = "busy"  # past what the bodies being read may hold together


class _Reading:
    """One body being read: its chunks so far, the bytes they count, when it began."""

    __slots__ = ("began", "chunks", "dropped", "held")

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.chunks: list[bytes] = []
        self.held = 0
        self.dropped = ""  # why it gave its room to another body, once it did


class BodyBudget:
    """Bytes of request bodies being read at once, at most `budget`; one body at most
    `max_body`."""

    def __init__(self, budget: int, max_body: int) -> None:
        self.budget = budget
        self.max_body = max_body
        self.held = 0
        self._readings: list[_Reading] = []  # oldest first

    def busy_message(self, why: str = "") -> str:
        """Why a body was refused `Read.BUSY` (`why`: what `read` said with it)."""
        return (
            f"the server is reading {self.held:,} bytes of requests, and at most "
            f"{self.budget:,} at once (mcp.max_in_flight MiB){why}; retry shortly"
        )

    async def read(self, receive: Receive) -> tuple[bytes, Read, str]:
        """The whole body, or what stopped it and (`Read.BUSY`) why, for `busy_message`; what
        it counted is given back either way."""
        reading = _Reading()
        self._readings.append(reading)
        try:
            while True:
                message = await receive()
                if reading.dropped:
                    return b"", Read.BUSY, reading.dropped
                if message["type"] != "http.request":
                    return b"", Read.WHOLE, ""  # disconnected: nobody reads the answer
                chunk = message.get("body", b"")
                if reading.held + len(chunk) > self.max_body:
                    return b"", Read.TOO_LARGE, ""
                if not self._take(reading, len(chunk)):
                    return b"", Read.BUSY, ""
                reading.chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(reading.chunks), Read.WHOLE, ""
        finally:
            self._readings.remove(reading)
            self.held -= reading.held

    def _take(self, reading: _Reading, size: int) -> bool:
        """Count `size` more bytes for `reading`, dropping other unfinished bodies for room
        when that makes enough: stalled ones oldest first, then larger ones largest first."""
        if self.held + size > self.budget:
            old = time.monotonic() - OLD_SECONDS
            after = reading.held + size
            stalled = [r for r in self._readings if r.began <= old and r is not reading]
            larger = sorted(
                (r for r in self._readings if r.held > after and r.began > old),
                key=lambda r: r.held,
                reverse=True,
            )
            room = self.budget - self.held
            making = []
            for other in stalled + larger:
                if room >= size:
                    break
                if not other.dropped:
                    making.append(other)
                    room += other.held
            if room < size:
                return False
            for other in making:
                stale = other.began <= old
                other.dropped = (
                    f", and this body, stalled over {OLD_SECONDS:g} s, gave its room to a newer one"
                    if stale
                    else f", and this body, {other.held:,} bytes so far, gave its room to a "
                    f"smaller one"
                )  # its connection is answered when its next chunk comes
                other.chunks.clear()
                self.held -= other.held
                other.held = 0
        self.held += size
        reading.held += size
        return True


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the already-read body once, then defers to the real one."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
