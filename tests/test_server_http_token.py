"""`octobrain mcp --bind`: a bind address and a bearer token a client can use, or a refusal
to start."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.server_support import free_port, octobrain_cmd, refused_start, server_env


@pytest.mark.parametrize(
    ("token", "said"),
    [
        ("s3cret-token-0123456789\r", "a control character"),  # a .env saved with CRLF
        ("                ", "a space at its start or end"),
        (" s3cret-token-0123456789", "a space at its start or end"),
        ("s3cret-tökén-0123456789", "a character outside ASCII"),
    ],
)
def test_a_token_no_client_can_send_is_refused_before_serving(
    tmp_path: Path, token: str, said: str
) -> None:
    # Such a token started the server on 0.0.0.0 all the same, and every request was
    # "401: missing or wrong bearer token": a header value is trimmed, so a space or CR at
    # its end never arrives, and a header carries no character outside ASCII as sent.
    stderr = refused_start(tmp_path, "--bind", f"0.0.0.0:{free_port()}", OCTOBRAIN_TOKEN=token)
    first = stderr.splitlines()[0]
    assert first.startswith("error: --token: must be printable ASCII with no space at"), first
    assert f"holds {said}" in first
    assert not token.strip() or token.strip() not in first  # the secret is not shown


@pytest.mark.parametrize("port", ["\uff10\uff18\uff10", "\u00b2", "8\u0668"])  # ０８０, ², 8٨
def test_a_port_of_digits_other_than_ascii_is_refused_before_serving(
    tmp_path: Path, port: str
) -> None:
    # `127.0.0.1:０８０` served on port 80 (int reads full-width digits), and `127.0.0.1:²`
    # ended in a traceback (isdigit takes it, int does not).
    stderr = refused_start(tmp_path, "--bind", f"127.0.0.1:{port}")
    assert stderr.splitlines()[0] == (
        "error: --bind: must be HOST:PORT with a port of ASCII digits in 1..65535, "
        f'got "127.0.0.1:{port}"'
    ), stderr


def test_a_bind_that_cannot_listen_is_refused_naming_it_before_serving(tmp_path: Path) -> None:
    # A port in use or a host that does not resolve ended in uvicorn's own line ("[Errno 98]
    # error while attempting to bind…", "[Errno -2] Name or service not known") with exit 3,
    # after the server had said it serves there, and without naming --bind.
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = taken.getsockname()[1]
        for bind, reason in [
            (f"127.0.0.1:{busy}", "Address already in use"),
            (f"no-such-host.invalid:{free_port()}", "cannot listen on no-such-host.invalid"),
        ]:
            stderr = refused_start(tmp_path, "--bind", bind, "--token", "s3cret-token-0123456789")
            first = stderr.splitlines()[0]
            assert first.startswith(f"error: --bind: cannot listen on {bind.split(':')[0]}"), first
            assert reason in first
            assert "MCP server on" not in stderr


def test_a_non_loopback_bind_in_the_config_asks_for_a_token_only_of_the_server(
    tmp_path: Path,
) -> None:
    # The config's check refused `mcp.bind = "0.0.0.0:…"` without `mcp.token` for every
    # command (memory ones too), though the token may come from OCTOBRAIN_TOKEN or --token
    # and --bind may override the bind: the server checks it as it starts, with all three.
    bind = {"OCTOBRAIN_MCP_BIND": f"0.0.0.0:{free_port()}"}
    stats = subprocess.run(
        octobrain_cmd("memory", "--scope", "acme/api", "stats"),
        env=server_env(tmp_path / "data", **bind),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stats.returncode == 0 and "total: 0" in stats.stdout, stats.stderr
    first = refused_start(tmp_path, **bind).splitlines()[0]
    assert first.startswith('error: --token: required to bind "0.0.0.0"'), first
    assert "OCTOBRAIN_TOKEN" in first
    # --bind wins over the config's: a loopback one needs no token (refused here for its port).
    first = refused_start(tmp_path, "--bind", "127.0.0.1:²", **bind).splitlines()[0]
    assert first.startswith("error: --bind: must be HOST:PORT"), first
