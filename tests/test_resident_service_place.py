"""A resident service whose socket or lock file is taken from under it (the runtime directory
removed and made again: `rm -rf`, logind at logout, a harness's temporary `XDG_RUNTIME_DIR`;
the socket file removed or replaced) lets go and exits, rather than listening where no client
reaches it, beside the service started in its place, for its whole idle time."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from octobrain.cli.service_client import ask
from tests.service_support import SCOPE, cli, current_settings, exited, start_service, wait_for
from tests.service_support import env as env  # (the `env` fixture)


def _daemons(env: dict[str, str]) -> list[int]:
    """The pids of the services running for this test's data directory."""
    mark = f"OCTOBRAIN_DATA_DIR={env['OCTOBRAIN_DATA_DIR']}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        ours = b"octobrain.cli.service_daemon" in cmdline and mark in environ.split(b"\0")
        if ours and not exited(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def _started(env: dict[str, str]) -> int:
    start_service(env)  # (its idle time is the fixture's 60 s)
    info = ask(current_settings(), "status")
    assert info is not None
    return int(info["pid"])


def test_a_service_whose_runtime_directory_was_removed_exits(env: dict[str, str]) -> None:
    # Before: the old service listened on a socket file gone, holding a lock on a lock file
    # gone, for its idle time (ten minutes by default, 200+ MB); the next command started a
    # second service in the directory made again, so two ran for the one data directory.
    old = _started(env)
    shutil.rmtree(current_settings().runtime_dir)
    assert wait_for(lambda: exited(old), 15), "the service without its files kept running"
    for _ in range(2):  # the first may run in-process and start the service as it ends
        done = cli(env, "memory", "--scope", SCOPE, "recent")
        assert (done.returncode, done.stdout) == (0, b"No memories yet.\n"), done.stderr
    assert wait_for(lambda: ask(current_settings(), "status") is not None, 60)
    assert len(_daemons(env)) == 1, _daemons(env)


def test_a_service_whose_socket_file_was_replaced_exits(env: dict[str, str]) -> None:
    # Another listener in its place (one the lock file removed let start): the old service is
    # unreachable. Before: it stayed for its idle time, beside the new one.
    old = _started(env)
    settings = current_settings()
    os.unlink(settings.socket_path)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        other.bind(settings.socket_path)
        other.listen(1)
        assert wait_for(lambda: exited(old), 15), "the unreachable service kept running"
        assert os.path.exists(settings.socket_path), "it removed the other's socket file"
    finally:
        other.close()
        os.unlink(settings.socket_path)


def test_a_service_whose_socket_file_was_removed_gives_way_to_a_new_one(
    env: dict[str, str],
) -> None:
    # Its lock still held, no command reached it and none started another: every command ran
    # in-process (loading the model and the store each time) until its idle time was out.
    old = _started(env)
    os.unlink(current_settings().socket_path)
    assert wait_for(lambda: exited(old), 15), "the unreachable service kept its lock"
    for _ in range(2):
        done = cli(env, "memory", "--scope", SCOPE, "recent")
        assert done.returncode == 0, done.stderr
    info = ask(current_settings(), "status")
    assert wait_for(lambda: ask(current_settings(), "status") is not None, 60), info
    assert _daemons(env) == [int(ask(current_settings(), "status")["pid"])]  # type: ignore[index]


def test_a_session_it_hosts_goes_on_and_the_service_exits_when_it_ends(
    env: dict[str, str], tmp_path: Path
) -> None:
    # As a service told to stop: its MCP sessions are served to their end, then it exits.
    # Before: it stayed for its idle time after the session ended too.
    old = _started(env)
    session = subprocess.Popen(
        [sys.executable, "-m", "octobrain", "mcp"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert session.stdin is not None and session.stdout is not None
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    try:
        for line in lines:
            session.stdin.write(json.dumps(line).encode() + b"\n")
            session.stdin.flush()
        assert json.loads(session.stdout.readline())["result"]["serverInfo"]["name"] == "octobrain"
        assert wait_for(lambda: ask(current_settings(), "status")["mcp_sessions"] == 1, 30)  # type: ignore[index]
        shutil.rmtree(current_settings().runtime_dir)
        time.sleep(3.0)  # (it looks every second)
        assert not exited(old), "it left the session it hosts"
        session.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
        session.stdin.flush()
        assert len(json.loads(session.stdout.readline())["result"]["tools"]) == 5
        session.stdin.close()
        assert session.wait(30) == 0
        assert wait_for(lambda: exited(old), 15), "it stayed once its session had ended"
    finally:
        session.kill()
        session.wait()
        session.stdout.close()
