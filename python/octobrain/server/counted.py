"""The stdio session's streams, counted: each tells `CappedStdin` when a request's place among
those in flight is free (its answer went out, or it settled unanswered, its client having
cancelled it), so the input is read on only while fewer than `MAX_IN_FLIGHT` are pending."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

    from octobrain.server.wire import CappedStdin


class _Counted:
    """One of the session's streams, wrapped to tell `stdin` when a request's place is free."""

    def __init__(self, stream: Any, stdin: CappedStdin) -> None:
        self._stream = stream
        self._stdin = stdin

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._stream.__aexit__(*exc)
        return result


class CountedReads(_Counted):
    """The session's incoming stream, each request in it carrying a hook the SDK runs when the
    request settles without an answer (its client cancelled it): its handler has returned, the
    work it waited on ended, and `stdin` frees its place among those in flight then."""

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, as the SDK's stream has it."""
        return getattr(self._stream, "last_context", None)

    def __aiter__(self) -> CountedReads:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._hooked(await self._stream.__anext__())

    async def receive(self) -> SessionMessage | Exception:
        """The next item, a request carrying the hook."""
        return self._hooked(await self._stream.receive())

    def _hooked(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        from mcp.shared.message import ServerMessageMetadata, SessionMessage
        from mcp_types import JSONRPCRequest

        if (
            isinstance(item, SessionMessage)
            and isinstance(item.message, JSONRPCRequest)
            and item.metadata is None
        ):

            async def settled(request_id: object = item.message.id) -> None:
                self._stdin.answered(request_id)

            item.metadata = ServerMessageMetadata(on_request_unanswered=settled)
        return item


class CountedWrites(_Counted):
    """The session's outgoing stream, telling `stdin` of each answer sent (an object with an id
    and no method: a result or an error; the server's own requests and notifications have a
    method). A send returns once the writer took the message, which it does only after
    writing the one before: a client that stops reading holds them here."""

    async def send(self, item: Any, /) -> None:
        await self._stream.send(item)
        message = getattr(item, "message", None)
        request_id = getattr(message, "id", None)
        if request_id is not None and not hasattr(message, "method"):
            self._stdin.answered(request_id)
