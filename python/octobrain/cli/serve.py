"""`octobrain mcp`: serve the memory tools over stdio (default) or streamable HTTP."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from octobrain.server import BrainPool, Workspace


@click.command("mcp")
@click.option(
    "--bind",
    metavar="HOST:PORT",
    default=None,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (default: mcp.bind).",
)
@click.option(
    "--token",
    default=None,
    help="Bearer token HTTP clients must send (default: $OCTOBRAIN_TOKEN, then mcp.token). "
    "Required for a non-loopback bind.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log more to stderr.")
def mcp_cmd(bind: str | None, token: str | None, verbose: bool) -> None:
    """Run the MCP server (stdout carries only protocol messages; logs go to stderr)."""
    import anyio

    from octobrain.cli.library_log import PrintableFormatter
    from octobrain.server import BrainPool, Workspace, build_server, serve_stdio

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("octobrain %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, handlers=[handler], force=True
    )
    pool = BrainPool()
    bind = bind if bind is not None else pool.config.mcp.bind
    host, port, secret = "", 0, ""
    remote = False  # clients on other machines (a non-loopback bind)
    if bind:
        from octobrain.server.http import check_token, is_loopback, listen, parse_bind

        # Bad flags are refused before anything starts: a warm-up thread still inside native
        # code (ONNX, Arrow) while the interpreter shuts down can crash the process.
        host, port = parse_bind(bind)
        secret = token or os.environ.get("OCTOBRAIN_TOKEN") or pool.config.mcp.token
        check_token(host, secret)
        listener = listen(host, port)
        remote = not is_loopback(host)
    workspace = dataclasses.replace(Workspace.scan(), http=bool(bind), remote=remote)
    server = build_server(pool, workspace)
    warm = _start_warm_up(pool, workspace) if pool.config.mcp.warm_up else None
    if not bind:
        anyio.run(serve_stdio, server)
    else:
        from octobrain.server.http import serve_http

        # Where the server listens is information a person starting it wants, even when not -v.
        logging.getLogger("octobrain.server.http").setLevel(logging.INFO)
        serve_http(
            server,
            listener=listener,
            host=host,
            token=secret,
            allowed_origins=pool.config.mcp.allowed_origins,
            request_seconds=pool.config.mcp.request_seconds,
            unread_seconds=pool.config.mcp.unread_seconds,
            max_sessions=pool.config.mcp.max_sessions,
            max_in_flight=pool.config.mcp.max_in_flight,
        )
    if warm is not None and warm.is_alive():
        # The session is over but the warm-up is not: leave without finalising the modules it
        # is running inside (every write was acknowledged and stored before its reply).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _start_warm_up(pool: BrainPool, workspace: Workspace) -> threading.Thread:
    """Load the heavy parts in the background, for the scope the working directory locks
    (else global), so the first tool call does not pay for them."""
    lock = workspace.cwd_lock
    scope, workdir = (lock.scope, lock.workdir) if lock is not None else ("", None)
    thread = threading.Thread(target=pool.warm_up, args=(scope, workdir), daemon=True)
    thread.start()
    return thread
