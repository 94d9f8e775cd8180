"""The MCP server: tool listing and dispatch on the SDK's low-level `Server`.

`initialize` and `tools/list` never touch the model or LanceDB; the first tool call loads them
(once, in a worker thread) through the shared `BrainPool`. Every failure a caller can cause
comes back as a tool result with `isError`, naming the field and the rule.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.lowlevel import RunVar
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from octobrain import __version__
from octobrain.errors import RULE_CHARS, InvalidInput, OctobrainError, as_json
from octobrain.knowledge.prefetch import FetchFirst
from octobrain.safe_text import client_text, one_line, printable
from octobrain.server import handlers
from octobrain.server.brief_listing import (
    BRIEF_NAME,
    BRIEF_RESOURCE,
    BRIEF_URI,
    brief_prompt,
    brief_template,
)
from octobrain.server.pool import BrainPool
from octobrain.server.progress import progress_of
from octobrain.server.quiet import QuietWarning
from octobrain.server.roots import (
    RootsRequired,
    ask_for_roots,
    role_of,
    session_id_of,
    session_scope_lock,
)
from octobrain.server.schemas import TOOLS_BY_NAME, allowed_arguments, tools_for
from octobrain.server.scoping import (
    ScopeLock,
    Workspace,
    global_argument,
    instructions,
    scope_argument,
)
from octobrain.server.stoppable import in_thread, unless_stopped
from octobrain.server.tool_spec import ToolSpec
from octobrain.server.wire import initialize_first, known_method, named_params, one_initialize
from octobrain.store.failures import TableUnreadable, unreadable_line

if TYPE_CHECKING:
    import threading
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from octobrain.memory.brain import Brain
    from octobrain.server.wire import CappedStdin

T = TypeVar("T")

log = logging.getLogger(__name__)

# Said at each tools/list of such a session: a few lines a minute, the rest counted.
_capability_ignored = QuietWarning(
    log, 4, 60.0, "", "%d more warnings on session capabilities were not logged"
)
# Worker threads per event loop and kind of work, apart from anyio's shared default (40): calls
# waiting their turn (on the pool lock, the knowledge lock, the one ingest embedding at a time)
# wait here, holding no thread, so no kind of call can take every thread from the others.
# "fetch" is held by a knowledge call from fetching its URL until it has used the answer, so at
# most two fetched bodies wait for the knowledge lock.
_THREADS = {"memory": 4, "knowledge": 2, "embed": 1, "fetch": 2}
_LIMITERS: RunVar[dict[str, anyio.CapacityLimiter]] = RunVar("octobrain_limiters")
INGEST_ROUNDS = 3  # embed-then-write attempts before a write may embed what is still missing


def _limiter(kind: str) -> anyio.CapacityLimiter:
    """This event loop's thread limiter for `kind` of work (see `_THREADS`)."""
    try:
        limiters = _LIMITERS.get()
    except LookupError:
        limiters = {k: anyio.CapacityLimiter(n) for k, n in _THREADS.items()}
        _LIMITERS.set(limiters)
    return limiters[kind]


_BRAIN_TOOLS = {
    "memorize": handlers.memorize,
    "remember": handlers.remember,
    "forget": handlers.forget,
}


class OctobrainServer:
    """Tools over a `BrainPool`, for one working directory."""

    def __init__(
        self, pool: BrainPool, workspace: Workspace, default_session_id: str | None = None
    ) -> None:
        self.pool = pool
        self.workspace = workspace
        # Knowledge notes of a client that names no session: one session per server (or, in
        # the resident service, per hosted connection).
        self.default_session_id = default_session_id or pool.default_session_id
        # As listed: the defaults and bounds of the config the pool's Brains apply.
        self.tools = tools_for(pool.config)
        self.server: Server[Any] = Server(
            "octobrain",
            version=__version__,
            title="Octobrain Memory Server",
            description="Long-term memory for AI agents: scoped, hybrid BM25 + vector recall",
            instructions=instructions(workspace),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )
        self.server.middleware.extend(
            (initialize_first, one_initialize, named_params, known_method)
        )

    # ---- scope lock -----------------------------------------------------------------------

    async def session_lock(
        self,
        ctx: ServerRequestContext[Any, Any],
        responses: types.InputResponses | None = None,
        *,
        can_ask: bool = False,
    ) -> ScopeLock | None:
        """The scope this request's session is locked to, or None (`session_scope_lock`)."""
        return await session_scope_lock(ctx, self.workspace, responses, can_ask=can_ask)

    # ---- handlers -------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The tools; `scope` only in unlocked sessions, `global` only in locked ones, both
        when each call may be locked by the roots sent with it (2026-07-28)."""
        locked = await self._locked_form(ctx)
        return types.ListToolsResult(tools=[tool_definition(spec, locked) for spec in self.tools])

    async def _locked_form(self, ctx: ServerRequestContext[Any, Any]) -> bool | None:
        """Whether a listing shows the locked form: None when each call may be locked by the
        roots sent with it (2026-07-28), not known when listing."""
        try:
            locked: bool | None = await self.session_lock(ctx) is not None
        except InvalidInput as exc:  # a malformed session capability: show the unlocked form
            _capability_ignored.warn("ignoring the client's session capability: %s", exc)
            locked = False
        caps = ctx.session.client_capabilities
        roots_per_call = caps is not None and caps.roots is not None
        if not locked and roots_per_call and not ctx.session.can_send_request:
            locked = None  # roots come with each call (2026-07-28): not known yet
        return locked

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Validate → one facade call in a worker thread → text. Errors become isError."""
        arguments = dict(params.arguments or {})
        try:
            reply = await self._dispatch(ctx, params.name, arguments, params.input_responses)
        except RootsRequired:
            return ask_for_roots()
        except InvalidInput as exc:  # one line: it may quote a path or value with line breaks
            reply = handlers.Reply(one_line(str(exc)), error=True)
        except Exception as exc:  # never crash the server over one call
            reply = handlers.Reply(_failure(exc, f"tool {params.name}"), error=True)
        return types.CallToolResult(
            content=[types.TextContent(text=printable(reply.text))], is_error=reply.error
        )

    def _session_of(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The knowledge session of a client that names none: over HTTP its MCP session (the
        `mcp-session-id` the SDK gave it, which only its own requests carry), none for a
        request outside any (a stateless client: it then has no notes unless it names a
        session); over stdio, or hosted by the service, the connection's."""
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is None:
            return self.default_session_id
        transport = headers.get("mcp-session-id")
        return f"http-{transport}" if transport else None

    async def _dispatch(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any],
        responses: types.InputResponses | None = None,
    ) -> handlers.Reply:
        if name not in TOOLS_BY_NAME:
            known = ", ".join(sorted(TOOLS_BY_NAME))
            raise InvalidInput("name", f"unknown tool {as_json(name)}; use one of {known}")
        lock = await self.session_lock(ctx, responses, can_ask=True)
        global_argument(arguments, lock, "global" in TOOLS_BY_NAME[name].properties)
        handlers.check_arguments(arguments, allowed_arguments(name, locked=lock is not None))
        scope, workdir = scope_argument(arguments, lock)
        workdir = workdir if workdir is not None else self.workspace.cwd  # git, relative paths
        if name == "knowledge":
            session_id = session_id_of(ctx, lock) or self._session_of(ctx)
            work = partial(handlers.knowledge, arguments=arguments)
            roots = self.workspace.local_roots(lock, self.pool.config.knowledge.allow_paths)
            call = partial(self.pool.call_knowledge, scope, workdir, session_id, work, roots)
            async with progress_of(ctx) as progress:  # (told as its embedding goes)
                knowledge = partial(call, progress=progress)
                try:  # (stopped between batches when the client cancels the call or is gone)
                    return await in_thread(partial(knowledge, {}), _limiter("knowledge"))
                except FetchFirst as first:  # a URL is fetched holding no lock (prefetch.py)
                    ref, fetch = first.ref, first.fetch
                async with _limiter("fetch"):  # its body kept until the call has used it
                    fetched = await anyio.to_thread.run_sync(fetch)
                    got = partial(knowledge, {ref.uri: fetched})
                    return await in_thread(got, _limiter("knowledge"))
        session_id, role = session_id_of(ctx, lock), role_of(ctx, lock)

        def in_pool(body: Callable[[Brain], T], *, read: bool = False) -> Awaitable[T]:
            return self._in_pool(scope, workdir, body, session_id, role, read=read)

        if name != "ingest":
            body = partial(_BRAIN_TOOLS[name], arguments=arguments)
            return await in_pool(body, read=name == "remember")
        # Checked under the pool lock, embedded without it (other calls go on meanwhile), one
        # ingest at a time, written under it again; turns that went missing in between (a
        # `forget`) are embedded the same way, never under the lock.
        plan = await in_pool(partial(handlers.plan_ingest, arguments=arguments))
        for _ in range(INGEST_ROUNDS):
            await in_thread(
                lambda stop: self.pool.embed(partial(plan.embed, stop)), _limiter("embed")
            )
            reply = await in_pool(partial(handlers.ingest, plan=plan, last=False))
            if reply is not None:
                return reply
        return cast(handlers.Reply, await in_pool(partial(handlers.ingest, plan=plan, last=True)))

    # ---- the briefing: one prompt, one resource -------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        """The `brief` prompt (an unlocked session names the scope as an argument)."""
        return types.ListPromptsResult(prompts=[brief_prompt(await self._locked_form(ctx))])

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """The session briefing as one user message."""
        if params.name != BRIEF_NAME:
            name = as_json(params.name)  # the client's: a line however long
            raise MCPError(INVALID_PARAMS, f'name: unknown prompt {name}; use "brief"')
        arguments = dict(params.arguments or {})
        try:
            text = await self._briefing(ctx, arguments, params.input_responses)
        except RootsRequired:
            return ask_for_roots()
        return types.GetPromptResult(
            description="What octobrain remembers that matters for this session",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(text=printable(text)))
            ],
        )

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """`octobrain://brief`: the briefing for the session's scope."""
        return types.ListResourcesResult(resources=[BRIEF_RESOURCE])

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """The briefing's template: what `resources/read` takes in this session's query."""
        template = brief_template(await self._locked_form(ctx))
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """The briefing as Markdown. Unlocked sessions may add `?scope=<scope>`."""
        parts = urlsplit(str(params.uri))
        if f"{parts.scheme}://{parts.netloc}{parts.path}" != BRIEF_URI:
            uri = as_json(str(params.uri))
            raise MCPError(INVALID_PARAMS, f"uri: unknown resource {uri}; use {BRIEF_URI}")
        query = parse_qs(parts.query, keep_blank_values=True)
        if repeated := next((k for k, v in query.items() if len(v) > 1), None):
            # The last one counted: `max_tokens=5&max_tokens=6` read 6 where a client, proxy
            # or approval prompt that keeps the first reads 5 (as a repeated JSON key, `wire`).
            raise MCPError(
                INVALID_PARAMS,
                f"uri: the query names {as_json(repeated)} twice (a URI leaves which one "
                "counts to the reader); give each parameter once",
            )
        arguments = {k: v[0] for k, v in query.items()}
        try:
            text = await self._briefing(ctx, arguments, params.input_responses)
        except RootsRequired:
            return ask_for_roots()
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=str(params.uri), mime_type="text/markdown", text=printable(text)
                )
            ]
        )

    async def _in_pool(
        self,
        scope: str,
        workdir: Path | None,
        body: Callable[[Brain], T],
        session_id: str,
        role: str,
        *,
        read: bool,
    ) -> T:
        """`body` with the Brain of `scope` and `role`, in a memory worker thread. A `read`
        whose client cancelled it or went away while it waited for the pool lock is not run
        (`NotStarted`); a write, once the client sent it, runs to its end: nothing
        half-written."""

        def work(stop: threading.Event) -> T:
            run = unless_stopped(body, stop) if read else body
            return self.pool.call(scope, workdir, run, session_id, role)

        return await in_thread(work, _limiter("memory"))

    async def _briefing(
        self,
        ctx: ServerRequestContext[Any, Any],
        arguments: dict[str, Any],
        responses: types.InputResponses | None = None,
    ) -> str:
        try:  # a malformed session capability too: invalid params, as the tools name it
            lock = await self.session_lock(ctx, responses, can_ask=True)
            max_tokens = _max_tokens(arguments.pop("max_tokens", None))
            allowed = frozenset({"scope"}) if lock is None else frozenset()
            if lock is None:  # the listed `octobrain://brief`, read as listed: the global scope
                arguments.setdefault("scope", "")
            shown = allowed | {"max_tokens"}
            handlers.check_arguments(arguments, allowed, "the briefing", shown)
            scope, workdir = scope_argument(arguments, lock)
        except InvalidInput as exc:
            raise MCPError(INVALID_PARAMS, one_line(str(exc))) from exc
        session_id, role = session_id_of(ctx, lock), role_of(ctx, lock)

        def work(brain: Any) -> str:
            from octobrain.memory.briefing import build_briefing
            from octobrain.memory.render_brief import briefing_markdown

            return briefing_markdown(build_briefing(brain, max_tokens=max_tokens))

        try:
            # Among the memory calls' threads: in anyio's shared ones a briefing left waiting
            # on the pool lock took a thread stdin is read by, 40 of them every one.
            text: str = await self._in_pool(scope, workdir, work, session_id, role, read=True)
        except InvalidInput as exc:
            raise MCPError(INVALID_PARAMS, one_line(str(exc))) from exc
        except Exception as exc:  # a damaged store is named, as a tool call names it
            raise MCPError(INTERNAL_ERROR, _failure(exc, "briefing")) from exc
        return text


def _failure(exc: Exception, what: str) -> str:
    """What a client is told of a call that failed for a reason other than its arguments
    (call within the `except`): octobrain's own error as it reads, a table that cannot be
    read as the one line `doctor` follows up, anything else as itself, logged whole."""
    unreadable = isinstance(exc, TableUnreadable)  # (a Brain's read of LanceDB: as below)
    if isinstance(exc, OctobrainError) and not unreadable:
        return f"error: {exc}"
    log.exception("%s failed", what)
    damage = str(exc) if unreadable else unreadable_line(exc)
    # An unforeseen error's text may quote what the client sent (a path of kilobytes): cut.
    said = client_text(str(exc), RULE_CHARS)
    return damage or f"internal error ({type(exc).__name__}: {said}); see the server log"


def _max_tokens(value: object) -> int | None:
    if value is None or value == "":
        return None
    text = str(value)
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text):  # int() takes any script's digits
        raise InvalidInput("max_tokens", f"must be an integer, got {as_json(value)}")
    return int(text)


def tool_definition(spec: ToolSpec, locked: bool | None) -> types.Tool:
    """One tool as `tools/list` shows it."""
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(locked=locked),
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
    )


def build_server(pool: BrainPool | None = None, workspace: Workspace | None = None) -> Server[Any]:
    """A ready-to-run low-level MCP server (for stdio, HTTP, or an in-memory test client)."""
    return OctobrainServer(
        pool if pool is not None else BrainPool(),
        workspace if workspace is not None else Workspace.scan(),
    ).server


async def serve_stdio(
    server: Server[Any], stdin: CappedStdin | None = None, stdout: Any = None
) -> None:
    """Serve one client over stdin/stdout (the SDK points fd 1 at stderr meanwhile), or over
    the given streams (the resident service's socket)."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    from octobrain.server.counted import CountedReads, CountedWrites
    from octobrain.server.wire import CappedStdin

    if stdin is None:
        stdin = CappedStdin()  # the size and depth caps; closing it ends the process promptly
    async with stdio_server(stdin=cast(Any, stdin), stdout=stdout) as (read_stream, write_stream):

        async def refuse(answer: dict[str, Any]) -> None:
            await write_stream.send(SessionMessage(types.JSONRPCError.model_validate(answer)))

        stdin.refuse = refuse
        reads, writes = CountedReads(read_stream, stdin), CountedWrites(write_stream, stdin)
        await server.run(reads, writes, server.create_initialization_options())
