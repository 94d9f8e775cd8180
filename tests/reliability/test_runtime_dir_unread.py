"""The resident service's runtime directory (its sockets and logs, of every session of this
user) is octobrain's own: an MCP session whose root holds it reads nothing of it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from octobrain.cli.service_settings import runtime_dir
from octobrain.server import build_server
from tests.reliability.untrusted_client import client_roots, knowledge_replies, pool_for
from tests.server_support import workspace


@pytest.mark.parametrize("xdg", ["set", "unset"])
def test_a_client_root_holding_the_services_log_reads_nothing_of_it(
    tmp_path: Path, monkeypatch: Any, xdg: str
) -> None:
    # Before: without XDG_RUNTIME_DIR (macOS, containers) the log is in /tmp/octobrain-<uid>,
    # and a client whose root was /tmp read it: other sessions' lines, their paths and errors.
    if xdg == "set":
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
        root = tmp_path
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        root = Path(tempfile.gettempdir()).resolve()
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    with tempfile.NamedTemporaryFile("w", dir=runtime_dir(), suffix=".log") as log:
        log.write("INFO another session read /home/me/secret-plans.md\n")
        log.flush()
        server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path))
        calls = [
            {"command": "read", "source": log.name},
            {"command": "match", "pattern": "secret", "source": log.name},
        ]
        replies = knowledge_replies(server, calls, list_roots_callback=client_roots(root.as_uri()))
    for refused, said in replies:
        assert refused and "octobrain's own" in said and "secret-plans" not in said, said
