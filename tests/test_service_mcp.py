"""`octobrain mcp` hosted by the resident service: a real MCP SDK client over stdio gets the
same tools and answers as from the in-process server, with the client's working directory
(its scope lock and where local files may be read); the in-process server answers when no
service can; writes are shared with the CLI; a damaged store reads as in a new process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from octobrain.cli.launch import mcp_routable
from octobrain.cli.service_client import ask, build_id
from tests.server_support import call, memory_id, run
from tests.service_support import (
    SCOPE,
    cli,
    current_settings,
    fake_service,
    memorize,
    start_service,
    wait_for,
)
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)

PROJECT = "github.com/acme/hosted"


@pytest.fixture
def env(service_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir with the service enabled, its service stopped at the end."""
    return service_env


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", f"https://{PROJECT}"])
    return path


def _stdio(env: dict[str, str], cwd: Path, *, service: bool) -> StdioServerParameters:
    run_env = {**env, "OCTOBRAIN_SERVICE_ENABLED": "1" if service else "0"}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "octobrain", "mcp"], env=run_env, cwd=cwd
    )


def _sessions() -> int:
    info = ask(current_settings(), "status")
    return -1 if info is None else int(info.get("mcp_sessions", -1))


def _session(
    env: dict[str, str], cwd: Path, *, service: bool, fact: str = "Deploys freeze on Fridays."
) -> dict[str, Any]:
    """One client session: what it lists and answers, and how many sessions the service hosted
    meanwhile."""
    inside, outside = cwd / "notes.md", cwd.parent / "outside.md"
    inside.write_text("# Notes\n\nThe deploy freeze starts on Fridays at noon.\n")
    outside.write_text("# Secret\n\nNot for this session.\n")
    seen: dict[str, Any] = {}

    async def body() -> None:
        async with Client(_stdio(env, cwd, service=service)) as client:
            seen["hosted"] = _sessions()
            tools = (await client.list_tools()).tools
            seen["tools"] = [t.model_dump(mode="json", by_alias=True) for t in tools]
            seen["instructions"] = client.instructions
            error, reply = await call(client, "memorize", title=fact[:20], content=fact)
            assert not error, reply
            seen["stored"] = memory_id(reply)
            seen["memorize"] = reply
            seen["remember"] = await call(client, "remember", query="deploy freeze fridays")
            seen["inside"] = await call(client, "knowledge", command="read", source="notes.md")
            seen["outside"] = await call(client, "knowledge", command="read", source=str(outside))
            seen["bad"] = await call(client, "memorize", title="x")

    run(body)
    return seen


def test_mcp_routing_rule() -> None:
    assert mcp_routable(["mcp"])
    assert not mcp_routable(["mcp", "--bind", "127.0.0.1:9"]) and not mcp_routable(["mcp", "-v"])


def test_hosted_session_matches_the_in_process_server(env: dict[str, str], tmp_path: Path) -> None:
    repo = _repo(tmp_path / "work" / "hosted")
    start_service(env)
    hosted = _session(env, repo, service=True)
    assert hosted["hosted"] == 1, "the session was not hosted by the service"
    alone = _session(env, repo, service=False, fact="Releases are cut on Tuesdays from main.")
    assert alone["hosted"] == 0
    for key in ("tools", "instructions", "inside", "outside", "bad"):
        assert hosted[key] == alone[key], key
    # The cwd is a git repository: both sessions are locked to its project.
    assert all("scope" not in t["inputSchema"]["properties"] for t in hosted["tools"])
    assert f"Scope: {PROJECT}" in hosted["memorize"] and f"Scope: {PROJECT}" in alone["memorize"]
    assert not hosted["inside"][0] and "deploy freeze" in hosted["inside"][1]
    error, reply = hosted["outside"]
    assert error and reply.startswith("source: ") and "outside the directories" in reply
    assert hosted["bad"][0] and hosted["bad"][1].startswith("content: required")
    # Writes are shared: one store, whichever process answers.
    assert hosted["stored"] in hosted["remember"][1] and hosted["stored"] in alone["remember"][1]
    for stored in (hosted["stored"], alone["stored"]):
        got = cli(env, "memory", "--scope", PROJECT, "get", stored)
        assert got.returncode == 0 and stored.encode() in got.stdout
    assert wait_for(lambda: _sessions() == 0, 10), "the hosted session did not end with its client"


def test_without_a_service_the_session_runs_in_process_and_starts_one(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert ask(current_settings(), "status") is None
    seen = _session(env, _repo(tmp_path / "hosted"), service=True)
    assert seen["hosted"] in (-1, 0) and not seen["remember"][0]  # (0: the new one is up)
    assert wait_for(lambda: _sessions() == 0, 90), "the first session did not start a service"
    memorize(env, "Visible everywhere", "Written after the service started.", service=True)


def test_a_service_of_another_build_does_not_get_the_session(
    env: dict[str, str], tmp_path: Path
) -> None:
    settings = current_settings()
    lines = [{"protocol": 1, "build": "0" * 24, "accepted": True}, {"mcp": True}]
    answer = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    assert build_id() != "0" * 24
    with fake_service(settings.socket_path, answer):
        seen = _session(env, _repo(tmp_path / "hosted"), service=True)
    assert [t["name"] for t in seen["tools"]][:2] == ["memorize", "remember"]
    assert not seen["remember"][0] and seen["stored"] in seen["remember"][1]


def _raw(env: dict[str, str], cwd: Path, lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "octobrain", "mcp"],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies = []
    for line in lines:
        proc.stdin.write(line)
        proc.stdin.flush()
        if b'"id"' in line[:40]:
            replies.append(json.loads(proc.stdout.readline()))
    proc.stdin.close()
    code = proc.wait(timeout=30)
    proc.stdout.close()
    return replies, code


def test_hosted_session_keeps_the_caps_and_ends_with_stdin(
    env: dict[str, str], tmp_path: Path
) -> None:
    start_service(env)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"experimental": {"session": {"scope": SCOPE}}},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    huge = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": "'
    huge += b"a" * (1 << 20) + b'"}}\n'
    deep = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": ' + b"[" * 80
    deep += b"]" * 80 + b"}}\n"
    lines = [
        json.dumps(init).encode() + b"\n",
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        huge,
        deep,
        b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}\n',
    ]
    replies, code = _raw(env, tmp_path, lines)
    assert code == 0
    assert replies[0]["result"]["serverInfo"]["name"] == "octobrain"
    assert replies[1]["id"] == 2 and "over 1,048,576 bytes" in replies[1]["error"]["message"]
    assert replies[2]["id"] == 3 and "over 64" in replies[2]["error"]["message"]
    assert len(replies[3]["result"]["tools"]) == 5
    assert wait_for(lambda: _sessions() == 0, 10)
    assert ask(current_settings(), "status") is not None, "the service ended with the session"


def test_a_warm_service_reports_a_damaged_store_as_a_new_process_would(
    env: dict[str, str],
) -> None:
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.", service=False)
    start_service(env)
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    backup = store.parent / "backup"
    shutil.copytree(store, backup)
    stats = ("memory", "--scope", SCOPE, "stats")

    def corrupt_data() -> None:
        data = sorted((store / "memories.lance" / "data").glob("*.lance"))[0]
        raw = bytearray(data.read_bytes())
        raw[10:200] = b"x" * 190
        data.write_bytes(bytes(raw))

    damages = {
        "table removed": lambda: shutil.rmtree(store / "memories.lance"),
        "versions removed": lambda: shutil.rmtree(store / "memories.lance" / "_versions"),
        "store manifest": lambda: (store / "_octobrain" / "manifest.json").write_text("{no"),
        "data file": corrupt_data,
        "table manifest": lambda: sorted(
            (store / "memories.lance" / "_versions").glob("*.manifest")
        )[0].write_bytes(b"garbage"),
    }
    for name, damage in damages.items():
        warm = cli(env, *stats)
        assert warm.returncode == 0 and b"total: 3" in warm.stdout, (name, warm.stderr)
        damage()
        for args in (stats, ("memory", "--scope", SCOPE, "remember", "durable fact")):
            warm, cold = cli(env, *args), cli(env, *args, service=False)
            assert cold.returncode == 1 and cold.stderr.count(b"\n") == 1, (name, cold.stderr)
            assert (warm.returncode, warm.stdout, warm.stderr) == (
                cold.returncode,
                cold.stdout,
                cold.stderr,
            ), (name, args)
        shutil.rmtree(store)
        shutil.copytree(backup, store)  # repaired: the warm service answers again
    assert cli(env, *stats).stdout.count(b"total: 3") == 1
    served = ask(current_settings(), "status")
    assert served is not None and served["served"] >= 3 * len(damages)


def test_concurrent_hosted_sessions_and_cli_commands_share_every_write(
    env: dict[str, str], tmp_path: Path
) -> None:
    import anyio

    start_service(env)
    repo = _repo(tmp_path / "hosted")
    ids: list[str] = []

    def cli_write(i: int) -> None:
        done = cli(
            env, "memory", "--scope", PROJECT, "memorize", "-t", f"Parallel fact {i}",
            "-c", f"Parallel fact number {i}, written by the CLI.", "--format", "json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])

    async def body() -> None:
        async with (
            Client(_stdio(env, repo, service=True)) as first,
            Client(_stdio(env, repo, service=True)) as second,
        ):
            assert _sessions() == 2

            async def write(client: Client, i: int) -> None:
                error, reply = await call(
                    client,
                    "memorize",
                    title=f"Parallel fact {i}",
                    content=f"Parallel fact number {i}, written over MCP.",
                )
                assert not error, reply
                ids.append(memory_id(reply))

            async with anyio.create_task_group() as group:
                for i, client in enumerate((first, second, first, second)):
                    group.start_soon(write, client, i)
                group.start_soon(anyio.to_thread.run_sync, cli_write, 4)
            for client in (first, second):
                error, reply = await call(client, "remember", query="parallel fact", limit=10)
                assert not error and all(i in reply for i in ids), reply

    run(body)
    assert len(set(ids)) == 5


def test_a_hosted_session_answers_a_burst_written_before_any_answer_is_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A client may write many requests (and large ones) before it reads: the relay must pass
    # every one on however slowly the service takes them in, as the in-process server does.
    start_service(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "octobrain", "mcp"],
        env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "burst", "version": "0"}},
    }  # fmt: skip
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    answered: set[int] = set()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answered.add(json.loads(line)["id"])

    reader = threading.Thread(target=read)
    reader.start()
    burst = [b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n']
    burst += [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(1, 3001)]
    pad = b"p" * 900_000  # each under the 1 MiB cap
    burst += [
        b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":"%s"}}}\n' % (i, pad)
        for i in range(3001, 3009)
    ]
    proc.stdin.write(b"".join(burst))
    proc.stdin.flush()
    everything = set(range(1, 3009))
    assert wait_for(lambda: answered == everything, 90), len(everything - answered)
    proc.stdin.close()  # (closing stdin ends a session: what still runs gets 0.8 s)
    assert proc.wait(timeout=30) == 0
    reader.join(timeout=30)
    proc.stdout.close()


def test_a_session_the_client_closes_ends_cleanly_however_the_threads_interleave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The relay told the service "no more input" and only then noted that stdin had closed; a
    # service ending the session in between was taken for one that ended it on its own: the
    # client printed "the service ended this MCP session" and exited 1 (2 runs in 10).
    import os
    import socket

    from octobrain.cli import mcp_relay

    ours, service = socket.socketpair()
    ended = threading.Event()

    class SlowToNote(socket.socket):
        def shutdown(self, how: int) -> None:
            super().shutdown(how)
            ended.wait(5)  # the service's end arrives before the pump goes on

    relay_sock = SlowToNote(fileno=os.dup(ours.fileno()))
    ours.close()
    read_end, write_end = os.pipe()
    os.close(write_end)  # the client has closed stdin
    stdin = os.fdopen(read_end, "rb")
    out_read, out_write = os.pipe()
    stdout = os.fdopen(out_write, "w")
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)

    def serve() -> None:
        while service.recv(1024):
            pass
        service.close()  # what the service does once the client's input ends

    threading.Thread(target=serve, daemon=True).start()
    watcher = threading.Timer(0.5, ended.set)
    watcher.start()
    try:
        assert mcp_relay._relay(relay_sock, b"") == 0
    finally:
        watcher.cancel()
        ended.set()
        stdin.close()
        stdout.close()
        os.close(out_read)


def test_the_service_loads_its_store_pool_without_the_mcp_sdk() -> None:
    # `octobrain.server`'s package imported the SDK for any of its modules: the service's
    # `server.pool` took it in as it loaded (0.8 s of 2.3 s on a busy 2-core machine), and
    # the commands sent to a loading service waited for it. A session imports it when it comes.
    code = (
        "import sys; import octobrain.cli.service_stores, octobrain.server.pool; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))); "
        "from octobrain.server import BrainPool, Workspace, build_server; "
        "print(build_server.__module__, BrainPool.__module__, Workspace.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[]",
        "octobrain.server.app octobrain.server.pool octobrain.server.scoping",
    ]
