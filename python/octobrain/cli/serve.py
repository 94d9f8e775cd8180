"""`octobrain mcp`: serve the memory tools over stdio (default) or streamable HTTP."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
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

    from octobrain.server import BrainPool, Workspace, build_server, serve_stdio

    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="octobrain %(levelname)s %(name)s: %(message)s",
    )
    pool = BrainPool()
    bind = bind if bind is not None else pool.config.mcp.bind
    workspace = dataclasses.replace(Workspace.scan(), http=bool(bind))
    server = build_server(pool, workspace)
    if pool.config.mcp.warm_up:
        _start_warm_up(pool, workspace)
    if not bind:
        anyio.run(serve_stdio, server)
        return
    from octobrain.server.http import check_token, parse_bind, serve_http

    # Where the server listens is information a person starting it wants, even when not -v.
    logging.getLogger("octobrain.server.http").setLevel(logging.INFO)
    host, port = parse_bind(bind)
    if token is None:
        token = os.environ.get("OCTOBRAIN_TOKEN") or pool.config.mcp.token
    secret = token
    check_token(host, secret)
    serve_http(
        server,
        host=host,
        port=port,
        token=secret,
        allowed_origins=pool.config.mcp.allowed_origins,
    )


def _start_warm_up(pool: BrainPool, workspace: Workspace) -> None:
    """Load the heavy parts in the background, for the scope the working directory locks
    (else global), so the first tool call does not pay for them."""
    import threading

    lock = workspace.cwd_lock
    scope, workdir = (lock.scope, lock.workdir) if lock is not None else ("", None)
    threading.Thread(target=pool.warm_up, args=(scope, workdir), daemon=True).start()
