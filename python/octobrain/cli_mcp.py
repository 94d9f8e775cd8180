"""`octobrain mcp`: serve the memory tools over stdio (default) or streamable HTTP."""

from __future__ import annotations

import logging
import os
import sys

import click


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
    """Run the MCP server (stdout carries only protocol messages; logs go to stderr).

    Bad options are reported by the root group (`error: <field>: <rule>`, exit 2).
    """
    import anyio

    from octobrain.server import BrainPool, build_server, serve_stdio

    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="octobrain %(levelname)s %(name)s: %(message)s",
    )
    pool = BrainPool()
    bind = bind if bind is not None else pool.config.mcp.bind
    if not bind:
        anyio.run(serve_stdio, build_server(pool))
        return
    from octobrain.server.http import check_token, parse_bind, serve_http

    host, port = parse_bind(bind)
    if token is None:
        token = os.environ.get("OCTOBRAIN_TOKEN") or pool.config.mcp.token
    secret = token
    check_token(host, secret)
    serve_http(
        build_server(pool),
        host=host,
        port=port,
        token=secret,
        allowed_origins=pool.config.mcp.allowed_origins,
    )
