"""Reading HTTP request bodies in the guard, with a bound on the bytes held across them.

A body is read whole before the MCP app sees it (its size and nesting are checked first), and
every connection may be sending one: 1,500 connections each sending 1 MB and stopping short
took the server from 311 MB to 1.78 GB in two seconds, held until `mcp.request_seconds`
closed them, with nothing stopping 20,000 of them. So the bytes of the bodies being read are
counted together (`BodyBudget`): a body's declared length is set aside before a byte of it is
read, a body of no declared length as it arrives, and a body that would take the count past
the budget is refused 503 unread. Once read, a request's place among those answered
(`mcp.max_in_flight`) bounds what it holds.
"""

from __future__ import annotations

from enum import Enum

from starlette.types import Message, Receive


class Read(Enum):
    """How reading a body ended."""

    WHOLE = "whole"
    TOO_LARGE = "too large"  # past the size one message may have
    BUSY = "busy"  # past what the bodies being read may hold together


class BodyBudget:
    """Bytes of request bodies being read at once, at most `budget`; one body at most
    `max_body`."""

    def __init__(self, budget: int, max_body: int) -> None:
        self.budget = budget
        self.max_body = max_body
        self.held = 0

    def busy_message(self) -> str:
        """Why a body was refused `Read.BUSY` (said right after, with nothing awaited)."""
        return (
            f"the server is reading {self.held:,} bytes of requests, and at most "
            f"{self.budget:,} at once (mcp.max_in_flight MiB); retry shortly"
        )

    async def read(self, receive: Receive, declared: int) -> tuple[bytes, Read]:
        """The whole body (`declared` bytes, or 0 when its length was not declared), or what
        stopped it; what was set aside for it is given back either way."""
        taken = 0

        def take(size: int) -> bool:
            nonlocal taken
            if size <= taken:
                return True
            if self.held + size - taken > self.budget:
                return False
            self.held += size - taken
            taken = size
            return True

        try:
            if not take(declared):
                return b"", Read.BUSY
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return b"".join(chunks), Read.WHOLE  # disconnected: the app sees it empty
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    return b"", Read.TOO_LARGE
                if not take(size):
                    return b"", Read.BUSY
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks), Read.WHOLE
        finally:
            self.held -= taken


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
