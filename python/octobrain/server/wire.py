"""Caps on one protocol message, the same on stdio and HTTP, and the stdio input that applies them.

A message over `MAX_MESSAGE_BYTES` or nested deeper than `MAX_DEPTH` is answered with a
JSON-RPC error (id null when it cannot be read) instead of being parsed: the SDK would either
hold it whole in memory or drop it silently. Over stdio, closing stdin ends the process within
`EXIT_GRACE_S` even while a tool call is still running (its client is gone; LanceDB commits are
atomic, so stopping mid-call loses nothing acknowledged).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1 << 20  # the largest tool call (10 kB content, 20 links) is far below this
MAX_DEPTH = 64  # the deepest tool call (related_to entries) nests 6 levels
EXIT_GRACE_S = 0.8
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_OTHER = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def nesting_depth(raw: bytes) -> int:
    """How deep `raw` (JSON text) nests arrays and objects; strings are skipped."""
    brackets = _STRING.sub(b"", raw).translate(None, _OTHER)
    return max(itertools.accumulate((_STEP[b] for b in brackets), initial=0))


def refusal(raw: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error answering `raw`, or None when it is within the caps and parses."""
    if len(raw) > MAX_MESSAGE_BYTES:
        return error(INVALID_REQUEST, f"message over {MAX_MESSAGE_BYTES} bytes; nothing was read")
    depth = nesting_depth(raw)
    if depth > MAX_DEPTH:
        return error(INVALID_REQUEST, f"message nested {depth} deep, over {MAX_DEPTH}")
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return error(PARSE_ERROR, f"not JSON: {exc}")
    if not isinstance(message, dict | list):
        return error(INVALID_REQUEST, "a message must be a JSON object")
    return None


def error(code: int, message: str, request_id: object = None) -> dict[str, Any]:
    """A JSON-RPC error object."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class CappedStdin:
    """stdin as an async iterator of messages within the caps (for the SDK's `stdio_server`).

    Refused messages are not passed on; `refuse` (set by the server loop) writes their error
    answers. At end of input `on_end` runs: by default the exit watchdog (a session the
    resident service hosts ends only its own session instead).
    """

    def __init__(
        self, stream: IO[bytes] | None = None, on_end: Callable[[], None] | None = None
    ) -> None:
        self._stream = stream if stream is not None else sys.stdin.buffer
        self._on_end = on_end if on_end is not None else exit_soon
        self.refuse: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    def _read_line(self) -> bytes | None:
        """One line, at most a byte over the cap (the rest of a longer one is discarded)."""
        line = self._stream.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return None
        if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
            while True:  # skip to the end of this message without holding it
                rest = self._stream.readline(1 << 16)
                if not rest or rest.endswith(b"\n"):
                    break
        return line

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import anyio.to_thread

        while True:
            line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if line is None:
                self._on_end()
                return
            if not line.strip():
                continue
            answer = refusal(line)
            if answer is None:
                yield line.decode("utf-8", errors="replace")
                continue
            log.warning("refused a message: %s", answer["error"]["message"])
            if self.refuse is not None:
                await self.refuse(answer)


def exit_soon(grace: float = EXIT_GRACE_S) -> None:
    """stdin closed: let the normal shutdown run, but end the process after `grace` seconds."""

    def stop() -> None:
        log.warning("stdin closed with a call still running; exiting without waiting for it")
        os._exit(0)

    timer = threading.Timer(grace, stop)
    timer.daemon = True
    timer.start()
