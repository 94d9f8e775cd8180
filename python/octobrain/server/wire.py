"""Caps on one protocol message, the same on stdio and HTTP, and the stdio input that applies them.

A message over `MAX_MESSAGE_BYTES` or nested deeper than `MAX_DEPTH` is answered with a
JSON-RPC error (with its id when that comes first, as clients write it, else null) instead of
being parsed: the SDK would either
hold it whole in memory or drop it silently. Over stdio, closing stdin ends the process within
`EXIT_GRACE_S` even while a tool call is still running (its client is gone; LanceDB commits are
atomic, so stopping mid-call loses nothing acknowledged).
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import logging
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO, Any

from octobrain.errors import as_json
from octobrain.server.quiet import QuietWarning

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1 << 20  # the largest tool call (10 kB content, 20 links) is far below this
MAX_DEPTH = 64  # the deepest tool call (related_to entries) nests 6 levels
# Array items and object members in one message. Reading one is Python work on the event
# loop, where every other client waits: 1 MiB of `[],[],…` (350,000 values) took 1-2.5 s to
# read, twice (this check and the SDK), and two clients sending such calls in a loop made a
# third one's `ping` wait 2.8 s. The largest call, an `ingest` of 500 turns, holds about 2,500.
MAX_VALUES = 16_384
# Requests of one session read but not yet answered. Past this, input is not read until an
# answer goes out: a client that writes without ever reading its answers would otherwise make
# the server hold a task and an answer for every request it sent (in the shared service too).
MAX_IN_FLIGHT = 32
# An `initialize` is kept for the whole session (the SDK holds its params): a 1 MiB one of
# small objects held 19.5 MB, and HTTP keeps up to `mcp.max_sessions` (1,000) sessions. A
# client's capabilities and info are one or two kB, a few dozen values; at these bounds a
# session holds at most about 0.2 MB (0.15 MB for an SDK client's).
MAX_INITIALIZE_BYTES = 16 << 10
MAX_INITIALIZE_VALUES = 256
EXIT_GRACE_S = 0.8
# Refused messages are logged at most this many times in these seconds (`quiet`; on stdio over
# every session of the process): a line a refusal let a client write 72 bytes of log (the
# resident service's file) for each 2-byte line it sent, 31.7 MB for 440 kB, without end.
REFUSALS_LOGGED = 20
REFUSALS_SECONDS = 10.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
_refusals = QuietWarning(
    log,
    REFUSALS_LOGGED,
    REFUSALS_SECONDS,
    f"over {REFUSALS_LOGGED} messages refused in {REFUSALS_SECONDS:g} s: more are counted, "
    "not logged",
    "%d more messages were refused, not logged",
)
# RFC 8259 (8.1) lets a JSON reader ignore a UTF-8 byte order mark, and some Windows tools
# write one before their first line; the SDK's readers took it for part of the message.
UTF8_BOM = b"\xef\xbb\xbf"
_NOT_UTF8 = "MCP messages are UTF-8 text (a UTF-8 byte order mark is allowed); nothing was done"
# A string, or one left open to the end of the text: the search for the next string starts
# again after each failed match, so an open string failing at the end was read to the end
# again from each of its quotes (`"\"\"\…`: 40 kB 10 s, 1 MiB hours, on the event loop).
# Unrolled (a run of plain characters at a time): a 1 MiB string 0.11 s -> 0.009 s.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_OTHER = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# Past this many brackets the depth is summed by numpy (loaded by then: the server's tools use
# it), not a Python step per bracket on the event loop: 1 MiB of `[],[],…` 81 → 9 ms.
_MANY_BRACKETS = 4096


def _depth(bare: bytes) -> int:
    """How deep JSON text without its strings (`bare`) nests arrays and objects."""
    brackets = bare.translate(None, _OTHER)
    if len(brackets) <= _MANY_BRACKETS:
        return max(itertools.accumulate((_STEP[b] for b in brackets), initial=0))
    import numpy as np

    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return max(0, int(np.cumsum(steps).max()))


def _values(bare: bytes) -> int:
    """How many values (array items and object members, the outermost value too) JSON text
    without its strings (`bare`) holds, counted without reading it: a comma separates two,
    and a bracket opens one holding one more unless it is empty."""
    tight = bare.translate(None, b" \t\r\n")
    empty = tight.count(b"[]") + tight.count(b"{}")
    return tight.count(b",") + tight.count(b"[") + tight.count(b"{") - empty + 1


# A leading member: its key, and its value when short (a number whole or not at all: the first
# 64 digits of a 5,000-digit id were answered as its id, one its client never sent).
_MEMBER = re.compile(
    rb'\s*("(?:[^"\\]|\\.){0,64}")\s*:\s*("(?:[^"\\]|\\.){0,256}"|[-+.\w]{1,64}(?![-+.\w]))\s*,?'
)


def leading_id(raw: bytes) -> str | int | None:
    """The id of a message too large to parse, when it comes among its first members (as
    clients write it: `{"jsonrpc": "2.0", "id": 7, "method": …, "params": {…}}`), so that
    refusing it answers that request rather than one with id null, which its client never
    matches to its call and waits on for good. None when it is not there."""
    start = len(raw) - len(raw.lstrip())
    if raw[start : start + 1] != b"{":
        return None
    at = start + 1
    for _ in range(8):
        member = _MEMBER.match(raw, at)
        if member is None:
            return None
        try:
            key, value = json.loads(member.group(1)), json.loads(member.group(2))
        except ValueError:
            return None
        if key == "id":
            usable = isinstance(value, str | int) and not isinstance(value, bool)
            return value if usable else None
        at = member.end()
    return None


class _TooManyDigits(ValueError):
    """A JSON integer longer than Python converts (`sys.get_int_max_str_digits`)."""


def _bounded_int(digits: str) -> int:
    limit = sys.get_int_max_str_digits()
    if limit and len(digits.lstrip("-")) > limit:
        raise _TooManyDigits(
            f"message holds an integer of {len(digits.lstrip('-')):,} digits, over "
            f"{limit:,}; nothing was done"
        )
    return int(digits)


class _RepeatedKey(ValueError):
    """A JSON object naming one key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One JSON object, each key once. JSON leaves a repeated key to the reader: this server
    (and the SDK) kept the last, so `{"name": "remember", "name": "forget"}` ran `forget`
    while a client, proxy or approval prompt that keeps the first showed `remember`."""
    read = dict(pairs)
    if len(read) == len(pairs):
        return read
    key = next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
    raise _RepeatedKey(
        f"message names the key {as_json(key)} twice in one object (JSON leaves which "
        "one counts to the reader); send each key once; nothing was done"
    )


def _screened(raw: bytes) -> tuple[Any, dict[str, Any] | None]:
    """`raw` parsed, and the error answering it (None when it is within the caps and parses)."""
    if len(raw) > MAX_MESSAGE_BYTES:
        message = (
            f"message over {MAX_MESSAGE_BYTES:,} bytes as JSON (escapes included); nothing was read"
        )
        return None, error(INVALID_REQUEST, message, leading_id(raw))
    bare = _STRING.sub(b"", raw)
    depth = _depth(bare)
    if depth > MAX_DEPTH:
        message = f"message nested {depth} deep, over {MAX_DEPTH}"
        return None, error(INVALID_REQUEST, message, leading_id(raw))
    if (values := _values(bare)) > MAX_VALUES:
        message = (
            f"message holds {values:,} values (array items and object members), over "
            f"{MAX_VALUES:,}; nothing was done"
        )
        return None, error(INVALID_REQUEST, message, leading_id(raw))
    if (refused := _encoding_refused(raw)) is not None:
        return None, refused
    try:
        message = json.loads(raw, parse_int=_bounded_int, object_pairs_hook=_unique_keys)
    except (_TooManyDigits, _RepeatedKey) as exc:  # JSON, but not one reading: to its call
        return None, error(INVALID_REQUEST, str(exc), leading_id(raw))
    except (ValueError, RecursionError) as exc:
        return None, error(PARSE_ERROR, f"not JSON: {exc}")
    if not isinstance(message, dict | list):
        return None, error(INVALID_REQUEST, "a message must be a JSON object")
    if isinstance(message, dict) and message.get("method") == "initialize":
        return message, _initialize_refused(message, len(raw))
    return message, None


def without_bom(raw: bytes) -> bytes:
    """A message without the UTF-8 byte order mark it may start with (`UTF8_BOM`)."""
    return raw.removeprefix(UTF8_BOM)


def _encoding_refused(raw: bytes) -> dict[str, Any] | None:
    """The error answering a message that is not UTF-8 (UTF-16 or UTF-32, which Python's
    `json` would read, or other bytes), else None. Answered with its id when that can be read,
    where the SDK's "not a JSON-RPC message" or Python's codec error said nothing of the
    encoding. A NUL byte is never in UTF-8 JSON text (JSON escapes it in a string)."""
    if b"\x00" in raw or raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        said = "message is UTF-16 or UTF-32 text"
    else:
        try:
            raw.decode("utf-8")
            return None
        except UnicodeDecodeError as exc:
            bad = f"{raw[exc.start]:#04x}"
            said = (
                f"message is not UTF-8: its byte {exc.start + 1:,} ({bad}) cannot be read as UTF-8"
            )
    ident = leading_id(raw)
    if ident is None:
        with contextlib.suppress(ValueError, RecursionError):
            read = json.loads(raw.strip(), parse_int=_bounded_int)  # (UTF-16, -32 read)
            ident = read.get("id") if isinstance(read, dict) else None
    usable = isinstance(ident, str | int) and not isinstance(ident, bool)
    return error(PARSE_ERROR, f"{said}; {_NOT_UTF8}", ident if usable else None)


def _initialize_refused(message: dict[str, Any], size: int) -> dict[str, Any] | None:
    """The error answering an `initialize` of `size` bytes past what a session keeps, else None."""
    values = _count_values(message, MAX_INITIALIZE_VALUES)
    if size <= MAX_INITIALIZE_BYTES and values <= MAX_INITIALIZE_VALUES:
        return None
    counted = f"over {MAX_INITIALIZE_VALUES:,}" if values > MAX_INITIALIZE_VALUES else f"{values:,}"
    said = (
        "initialize: its capabilities and client info are kept for the whole session, so it "
        f"may be at most {MAX_INITIALIZE_BYTES:,} bytes as JSON holding at most "
        f"{MAX_INITIALIZE_VALUES:,} values; got {size:,} bytes, {counted} values"
    )
    ident = message.get("id")
    usable = isinstance(ident, str | int) and not isinstance(ident, bool)
    return error(INVALID_REQUEST, said, ident if usable else None)


def _count_values(message: Any, most: int) -> int:
    """How many JSON values (objects, arrays, strings, numbers…) `message` holds, counted up
    to `most` + 1."""
    count, todo = 0, [message]
    while todo and count <= most:
        value = todo.pop()
        count += 1
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return count


_NOT_JSONRPC = (
    'not a JSON-RPC 2.0 message (it needs jsonrpc "2.0", a string or integer id, a method '
    "name, object params and valid Unicode); nothing was done"
)


def read_body(raw: bytes) -> tuple[Any, dict[str, Any] | None]:
    """One message (an HTTP body) parsed, and the error answering it when the SDK would not
    read it as JSON-RPC, as stdio answers it (None: it reads it). Over HTTP the SDK answered a
    batch or another jsonrpc version with its validator's multi-line dump, documentation links
    included."""
    message, answer = _screened(raw)
    if answer is None:
        answer = _as_sdk_reads(message, raw.decode("utf-8", errors="replace"))[0]
    return message, answer


def _as_sdk_reads(message: Any, text: str) -> tuple[dict[str, Any] | None, bool]:
    """How the SDK reads a parsed message: the error answering one it would drop without a
    word (a lone surrogate, another jsonrpc version, a batch...) or take for a notification
    though it has an id (an object id), with the id when usable, else None; and whether it is
    a request (it will be answered). A refused message is never passed on: the SDK would
    neither answer it nor free its place among the requests in flight."""
    from mcp import types

    ident = message.get("id") if isinstance(message, dict) else None
    usable = isinstance(ident, str | int) and not isinstance(ident, bool)
    try:
        read = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception:  # (pydantic's error: any message it refuses)
        return error(INVALID_REQUEST, _NOT_JSONRPC, ident if usable else None), False
    if isinstance(message, dict) and "id" in message and not usable:
        return error(INVALID_REQUEST, _NOT_JSONRPC), False
    return None, isinstance(read, types.JSONRPCRequest)


def request_key(request_id: object) -> object:
    """A request id as the SDK matches it (a cancel may name 7 as "7")."""
    from mcp.shared.dispatcher import coerce_request_id

    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return coerce_request_id(request_id)


def duplicate_id(request_id: object) -> dict[str, Any]:
    """The answer to a request whose id names one still being answered: MCP wants each id
    once. Passed on, it took the first one's place: a cancel of that id reached neither, the
    in-flight cap counted one, and over HTTP the first one's answer never came."""
    return error(
        INVALID_REQUEST,
        "id: a request with this id is still being answered; send each request its own id",
        request_id,
    )


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
        # Requests passed on and not yet answered or settled unanswered (`answered`), by id:
        # the SDK never answers a request its client cancelled, so a count of answers alone
        # kept a place for each, and 31 cancels left the session one at a time. A cancel does
        # not free the place itself: the call's worker thread runs on until its work ends, and
        # a client sending call, cancel, call, cancel… had 40 briefings running at once.
        self._pending: dict[object, int] = {}
        self._in_flight = 0

    def answered(self, request_id: object) -> None:
        """The answer to `request_id` went out (called by the session's writes,
        `CountedWrites`), or it settled with none, its client having cancelled it: its
        handler, and so the thread it waited on, has ended (`CountedReads`)."""
        key = request_key(request_id)
        held = self._pending.get(key, 0)
        if held:  # (not a request it passed on: nothing to free)
            self._in_flight -= 1
            if held == 1:
                del self._pending[key]
            else:
                self._pending[key] = held - 1

    def _passed_on(self, message: dict[str, Any]) -> None:
        """Count a request passed on to the SDK."""
        key = request_key(message["id"])
        self._pending[key] = self._pending.get(key, 0) + 1
        self._in_flight += 1

    def _read_line(self) -> bytes | None:
        """One line, its message at most a byte over the cap (the rest of a longer one is
        discarded); its ending (`\n` or `\r\n`) is not the message's, so not counted."""
        line = self._stream.readline(MAX_MESSAGE_BYTES + 2)
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
        import anyio
        import anyio.to_thread

        while True:
            while self._in_flight >= MAX_IN_FLIGHT:
                await anyio.sleep(0.005)  # until an answer goes out (the client reads them)
            line = await anyio.to_thread.run_sync(self._read_line, abandon_on_cancel=True)
            if line is None:
                self._on_end()
                return
            line = without_bom(line)
            if not line.strip():
                continue
            message, answer = _screened(line.removesuffix(b"\n").removesuffix(b"\r"))
            text = line.decode("utf-8", errors="replace")
            request = False
            if answer is None:
                answer, request = _as_sdk_reads(message, text)
            if answer is None and request and request_key(message["id"]) in self._pending:
                answer, request = duplicate_id(message["id"]), False
            if answer is None:
                if request:
                    self._passed_on(message)
                yield text
                continue
            _refusals.warn("refused a message: %s", answer["error"]["message"])
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


async def named_params(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a request whose params the SDK refuses (`"arguments": ["x"]`, a
    prompt argument that is a number) is answered naming the field and the rule, where the
    SDK says only "Invalid request parameters". The value sent is not repeated."""
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    from octobrain.safe_text import client_text

    try:
        return await call_next(ctx)
    except ValidationError as exc:
        # Only a request's own model (`CallToolRequestParams`, `GetPromptRequest`): one the
        # server made wrongly is its own error, not the client's params.
        if not exc.title.endswith(("Params", "Request")):
            raise
        first = exc.errors(include_url=False, include_input=False)[0]
        loc = [str(part) for part in first["loc"]]
        where = ".".join(loc if loc[:1] == ["params"] else ["params", *loc])
        said = f"{where}: {first['msg']}"  # (keys, and a union's tag in a message, are sent)
        message = client_text(said, 400)
        raise MCPError(code=INVALID_PARAMS, message=message) from None


async def known_method(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a method the server does not serve is answered with its name cut to
    100 characters on one line (as an unknown prompt's is), where the SDK's -32601 "Method not
    found" carries the name whole in its data: a 900 kB name was a 900 kB answer."""
    from mcp.shared.exceptions import MCPError

    from octobrain.safe_text import client_text

    try:
        return await call_next(ctx)
    except MCPError as exc:
        if exc.error.code != METHOD_NOT_FOUND or not isinstance(exc.error.data, str):
            raise
        shown = client_text(exc.error.data)
        raise MCPError(code=METHOD_NOT_FOUND, message=exc.error.message, data=shown) from None


async def initialize_first(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a request before `initialize` is refused saying so, where the SDK
    (its code kept for compatibility) said only "Invalid request parameters", data ""."""
    from mcp.shared.exceptions import MCPError

    try:
        return await call_next(ctx)
    except MCPError as exc:
        sdk_gate = (exc.error.code, exc.error.message, exc.error.data) == (
            INVALID_PARAMS,
            "Invalid request parameters",
            "",
        )
        if not sdk_gate or ctx.method == "initialize" or ctx.session.client_params is not None:
            raise
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{ctx.method}: this connection is not initialized yet; send `initialize` "
            "(then `notifications/initialized`) first",
        ) from None


async def one_initialize(ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: a second `initialize` on one connection is refused (-32600), as MCP
    allows one. The SDK took it and put its capabilities in place of the first's, so a session
    locked to one project's scope by its capability was, from the next call, in another's."""
    from mcp.shared.exceptions import MCPError

    if ctx.method == "initialize" and ctx.session.client_params is not None:
        raise MCPError(
            code=INVALID_REQUEST,
            message="initialize: this connection is initialized already; open a new one",
        )
    return await call_next(ctx)
