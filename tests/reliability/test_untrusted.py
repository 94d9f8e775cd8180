"""An untrusted MCP client: local files confined to the session's project, SSRF spellings, caps
on one call's work, and malformed protocol input."""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge
from octobrain.knowledge.fetch import FetchError, resolve_checked
from octobrain.models import NOTE_BYTES
from octobrain.server import BrainPool, build_server
from octobrain.server.schemas import KNOWLEDGE
from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    http_server,
    initialize_message,
    octobrain_cmd,
    run,
    server_env,
    workspace,
)

OUTSIDE = Path("/etc/passwd")


def pool_for(db: Path, **knowledge: Any) -> BrainPool:
    config = Config(
        embedding=EmbeddingConfig(model="hash:64"), knowledge=KnowledgeConfig(**knowledge)
    )
    return BrainPool(config, uri=db)


def _roots(*uris: str) -> Callable[[Any], Awaitable[types.ListRootsResult]]:
    """A client's `roots/list` answer naming `uris`, as its callback."""

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in uris])  # type: ignore[arg-type]

    return roots


def _project(tmp: Path) -> Path:
    project = tmp / "project"
    project.mkdir()
    (project / "notes.md").write_text("# Notes\n\nThe deploy key rotates every quarter.\n")
    (project / "link.md").symlink_to(OUTSIDE)
    return project


def _knowledge_replies(server: Any, calls: list[dict[str, Any]], **client: Any) -> list[Any]:
    replies: list[Any] = []

    async def body() -> None:
        async with Client(server, mode="legacy", **client) as c:
            for arguments in calls:
                replies.append(await call(c, "knowledge", **arguments))

    run(body)
    return replies


ESCAPES = [
    {"command": "read", "source": str(OUTSIDE)},
    {"command": "read", "source": "../../../../../../etc/hostname"},
    {"command": "read", "source": "link.md"},
    {"command": "read", "source": OUTSIDE.as_uri()},
    {"command": "search", "query": "root", "source": str(OUTSIDE)},
    {"command": "match", "pattern": "root", "source": "link.md"},
]


def test_mcp_reads_no_local_file_outside_the_project(tmp_path: Path, monkeypatch: Any) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    inside = {"command": "read", "source": "notes.md"}
    *refused, allowed = _knowledge_replies(server, [*ESCAPES, inside])
    for arguments, (error, reply) in zip(ESCAPES, refused, strict=True):
        assert error, (arguments, reply)
        assert "root:" not in reply, (arguments, reply)
        assert reply.startswith("source: ") and "knowledge.allow_paths" in reply, reply
    assert allowed == (False, allowed[1]) and "rotates every quarter" in allowed[1]


@pytest.mark.parametrize("swapped", ["the file", "a directory above it"])
def test_a_symlink_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: Any, swapped: str
) -> None:
    # The path is confined first and opened after: a client that can write in the project (a
    # checkout it controls) may put a link in the way in between. The swap runs right after
    # the check here, so the race is won every time.
    import octobrain.knowledge.core as core

    project = _project(tmp_path)
    (project / "docs").mkdir()
    (project / "docs" / "passwd").write_text("# Passwd\n\nNothing secret in this project.\n")
    checked = core.confine

    def swap_after_check(ref: Any, roots: Any, store: Any) -> Any:
        checked_ref = checked(ref, roots, store)
        if swapped == "the file":
            (project / "docs" / "passwd").unlink()
            (project / "docs" / "passwd").symlink_to(OUTSIDE)
        else:
            (project / "docs").rename(project / "docs.old")
            (project / "docs").symlink_to(OUTSIDE.parent)
        return checked_ref

    monkeypatch.setattr(core, "confine", swap_after_check)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    [(error, reply)] = _knowledge_replies(server, [{"command": "read", "source": "docs/passwd"}])
    assert error and "root:" not in reply, reply
    assert reply == (
        f"source: {project / 'docs' / 'passwd'} changed while it was opened "
        "(a symlink took its place); not read"
    )


def test_allow_paths_opens_a_directory_and_roots_replace_the_cwd(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = _project(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "guide.md").write_text("# Guide\n\nShared guide text about onboarding.\n")
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "db", allow_paths=(str(shared),))
    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(shared / "guide.md"), "scope": ""},
        {"command": "read", "source": str(OUTSIDE), "scope": ""},
    ]
    (ok, guide), (refused, _) = _knowledge_replies(server, calls)
    assert not ok and "onboarding" in guide
    assert refused

    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nText in the client's root directory.\n")

    roots = _roots(other.as_uri())

    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(other / "x.md")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (in_root, text), (cwd_refused, reply) = _knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert not in_root and "client's root" in text
    assert cwd_refused and "knowledge.allow_paths" in reply


def test_a_client_root_holding_octobrains_data_dir_reads_nothing_of_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A client naming a root that holds the data directory (`/srv`, `/tmp`, the directory
    # itself) read its files: `config.toml` there may hold `mcp.token` and storage credentials.
    project = _project(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("[mcp]\ntoken = 'a-secret-token-of-the-server'\n")
    (data / "notes.txt").write_text("Private notes kept beside the store.\n")
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(data))
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(project)

    roots = _roots(tmp_path.as_uri())

    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(data / "config.toml")},
        {"command": "read", "source": str(data / "notes.txt")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (config, said), (notes, _), (ok, text) = _knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert config and notes and "secret" not in said and "octobrain's own" in said, said
    assert not ok and "deploy key" in text


def test_a_client_root_holding_the_store_reads_nothing_of_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # The store may live outside the data directory (`storage.uri`, a team's under `/srv`): a
    # root holding it read the store's files (its records, of every project's memories).
    project = _project(tmp_path)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "store")
    pool.call(PROJECT_A, None, lambda b: b.remember("anything at all"))
    records = sorted((tmp_path / "store" / "_octobrain").rglob("*.json"))
    assert records
    server = build_server(pool, workspace(project))
    calls = [{"command": "read", "source": str(record)} for record in records]
    calls.append({"command": "match", "pattern": "scope", "source": str(records[0])})
    replies = _knowledge_replies(server, calls, list_roots_callback=_roots(tmp_path.as_uri()))
    for refused, said in replies:
        assert refused and "octobrain's own" in said and "tables" not in said, said


def test_a_hit_whose_file_is_now_in_the_store_is_not_looked_at(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A hit's file is looked at (a `stat`) to mark it stale; the store was not left out there:
    # a client that indexed `d/<name of a store record>` and then made `d` a link into the
    # store learned from the mark whether that record exists and changed.
    project = _project(tmp_path)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "store")
    pool.call(PROJECT_A, None, lambda b: b.remember("anything at all"))
    record = sorted((tmp_path / "store" / "_octobrain").rglob("*.json"))[0]
    decoy = project / "d" / record.name
    decoy.parent.mkdir()
    decoy.write_text("# Decoy\n\nA page about lighthouses.\n")
    roots = _roots(tmp_path.as_uri())
    indexed = {"command": "search", "query": "lighthouses", "source": str(decoy)}
    [(error, _)] = _knowledge_replies(
        build_server(pool, workspace(project)), [indexed], list_roots_callback=roots
    )
    assert not error
    shutil.rmtree(decoy.parent)
    decoy.parent.symlink_to(record.parent)
    calls = [
        {"command": "search", "query": "lighthouses"},
        {"command": "match", "pattern": "lighth"},
    ]
    replies = _knowledge_replies(
        build_server(pool, workspace(project)), calls, list_roots_callback=roots
    )
    for error, said in replies:
        assert not error and "lighthouses" in said and "Stale" not in said, said


def test_a_hard_link_to_octobrains_config_in_the_project_is_not_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # `confine` compares paths: a hard link in the project to the config file (which may hold
    # `mcp.token` and storage credentials) was read as a project file. A hard link to any
    # other file is that file, read as a copy would be (pnpm's node_modules are such links).
    project = _project(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("[mcp]\ntoken = 'a-secret-token-of-the-server'\n")
    (project / "settings.md").hardlink_to(data / "config.toml")
    elsewhere = Path(tempfile.mkdtemp(dir=tmp_path))
    (elsewhere / "shared.md").write_text("# Shared\n\nA guide kept in a package store.\n")
    (project / "shared.md").hardlink_to(elsewhere / "shared.md")
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(data))
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    calls = [
        {"command": "read", "source": "settings.md"},
        {"command": "search", "query": "token secret", "source": "settings.md"},
        {"command": "match", "pattern": "token", "source": "settings.md"},
        {"command": "read", "source": "shared.md"},
    ]
    *refused, (error, shared) = _knowledge_replies(server, calls)
    for refusal, reply in refused:
        assert refusal and "secret-token" not in reply, reply
        assert reply == (
            f"source: {project / 'settings.md'} is octobrain's config file under another name "
            "(a hard link; it may hold tokens and credentials): an MCP session never reads it"
        )
    assert not error and "package store" in shared, shared


def test_a_client_naming_thousands_of_roots_is_read_from_its_first_64(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Every file read resolves each root again (and, where roots come with each call, every
    # call checks them all): 15,000 roots made each call of the session cost 1.4 s of CPU.
    from octobrain.server.scoping import MAX_ROOTS

    project = _project(tmp_path)
    dirs = [tmp_path / "roots" / f"r{i}" for i in range(200)]
    last, first_past = MAX_ROOTS - 2, MAX_ROOTS - 1  # the project is the first root
    for i in (0, last, first_past, 199):
        dirs[i].mkdir(parents=True)
        (dirs[i] / "doc.md").write_text(f"# Doc\n\nRoot {i} of the client.\n")

    roots = _roots(project.as_uri(), *(d.as_uri() for d in dirs))

    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(dirs[i] / "doc.md")} for i in (0, last, first_past, 199)
    ]
    replies = _knowledge_replies(server, calls, list_roots_callback=roots)
    assert [error for error, _ in replies] == [False, False, True, True], replies
    assert f"Root {last} of the client" in replies[1][1]
    refused = f"source: {dirs[first_past] / 'doc.md'} is outside the directories"
    assert replies[2][1].startswith(refused), replies[2][1]


@pytest.mark.parametrize("where", ["/", "home", "home/.ssh"])
def test_a_server_started_in_no_project_reads_no_local_file(
    tmp_path: Path, monkeypatch: Any, where: str
) -> None:
    # A desktop client may start its servers in `/` or the home directory: that working
    # directory made every file below it readable by the session, /etc/passwd and ~/.ssh too.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id.md").write_text("# Key\n\nthe private key text\n")
    monkeypatch.setenv("HOME", str(home))
    cwd = Path("/") if where == "/" else tmp_path / where
    monkeypatch.chdir(cwd)
    server = build_server(pool_for(tmp_path / "db"), workspace(cwd))
    calls = [
        {"command": "read", "source": "/etc/passwd", "scope": ""},
        {"command": "read", "source": str(home / ".ssh" / "id.md"), "scope": ""},
    ]
    (etc, passwd), (ssh, key) = _knowledge_replies(server, calls)
    assert etc and "root:" not in passwd, passwd
    assert ssh and "private key" not in key, key
    assert "knowledge.allow_paths" in key, key


def test_a_project_in_a_home_below_a_system_directory_reads_its_files(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # root's home is /root, a system directory: its projects (`/root/app`, a container's) were
    # read from as `/root` itself is not, so `knowledge read README.md` there was refused.
    # (The directory holding tmp_path stands for /root: files cannot be written there.)
    from octobrain.server import scoping

    monkeypatch.setattr(scoping, "_SYSTEM_DIRS", scoping._SYSTEM_DIRS | {tmp_path.parts[1]})
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id.md").write_text("# Key\n\nthe private key text\n")
    monkeypatch.setenv("HOME", str(home))
    project = _project(home)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": str(project / "notes.md"), "scope": ""},
        {"command": "read", "source": str(home / ".ssh" / "id.md"), "scope": ""},
        {"command": "read", "source": str(OUTSIDE), "scope": ""},
    ]
    (refused, notes), (ssh, key), (etc, passwd) = _knowledge_replies(server, calls)
    assert not refused and "deploy key rotates" in notes, notes
    assert ssh and "private key" not in key, key
    assert etc and "root:" not in passwd, passwd
    # The same for a client's roots, and for root's own home as it is.
    monkeypatch.setenv("HOME", "/root")
    assert scoping.readable_root(Path("/root/app"))
    assert not any(map(scoping.readable_root, [Path("/root"), Path("/root/.ssh"), Path("/etc")]))
    monkeypatch.setenv("HOME", "/")  # (a home of `/` makes nothing below it a project's)
    assert not any(map(scoping.readable_root, [Path("/"), Path("/etc"), Path("/root/app")]))


def test_a_server_started_in_a_project_inside_a_system_directory_reads_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # A container's project often sits in /usr/src/app or /var/www/site. The directory a
    # server was started in is its user's choice: a project's when it lies inside a system
    # directory, though a client's root there is not (nor the system directory itself).
    with tempfile.TemporaryDirectory(dir="/var/tmp") as base:
        project = _project(Path(base))
        monkeypatch.chdir(project)
        server = build_server(pool_for(tmp_path / "db"), workspace(project))
        calls = [
            {"command": "read", "source": str(project / "notes.md"), "scope": ""},
            {"command": "read", "source": "/etc/passwd", "scope": ""},
        ]
        (error, notes), (etc, passwd) = _knowledge_replies(server, calls)
        assert not error and "rotates every quarter" in notes, notes
        assert etc and "root:" not in passwd, passwd

        roots = _roots(project.as_uri())

        server = build_server(pool_for(tmp_path / "db2"), workspace(project))
        [(refused, _)] = _knowledge_replies(
            server,
            [{"command": "read", "source": str(project / "notes.md")}],
            list_roots_callback=roots,
        )
        assert refused
    for system in ("/var", "/etc/ssl", "/proc/1"):
        monkeypatch.chdir(system)
        server = build_server(pool_for(tmp_path / "db3"), workspace(Path(system)))
        [(error, reply)] = _knowledge_replies(
            server, [{"command": "read", "source": "/etc/passwd", "scope": ""}]
        )
        assert error and "root:" not in reply, (system, reply)


def test_an_http_server_reads_no_local_file_unless_configured(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    remote = dataclasses.replace(workspace(project, PROJECT_A), http=True)
    server = build_server(pool_for(tmp_path / "db"), remote)
    [(error, reply)] = _knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert error and "no local directory" in reply and "knowledge.allow_paths" in reply
    server = build_server(pool_for(tmp_path / "db2", allow_paths=(str(project),)), remote)
    [(error, reply)] = _knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert not error and "rotates every quarter" in reply


# ---- SSRF: an IPv4 inside an IPv6 address is checked as that IPv4 ---------------------------

EMBEDDED_LOOPBACK = [
    "64:ff9b::7f00:1",  # NAT64
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "2002:7f00:1::1",  # 6to4
    "::7f00:1",  # IPv4-compatible
    "::ffff:7f00:1",  # IPv4-mapped
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 to the cloud metadata address
]


def _answering(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.mark.parametrize("address", EMBEDDED_LOOPBACK)
def test_an_ipv4_embedded_in_ipv6_is_checked_as_that_ipv4(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    with pytest.raises(FetchError, match=r"^source: refusing docs\.example\.com"):
        resolve_checked("docs.example.com", 443, ())


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"])
def test_ipv6_forms_of_a_public_ipv4_still_pass(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    chosen = resolve_checked("docs.example.com", 443, ())
    assert ipaddress.ip_address(chosen) == ipaddress.ip_address(address)


def test_a_url_httpx_cannot_parse_is_one_line(tmp_path: Path) -> None:
    server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path, PROJECT_A))
    [(error, reply)] = _knowledge_replies(
        server, [{"command": "read", "source": "http://0177.0.0.1/"}]
    )
    assert error and reply.startswith("source: http://0177.0.0.1") and "\n" not in reply, reply


# ---- one call's work is bounded, and never holds up the others -------------------------------


def test_a_note_is_capped_and_the_schema_states_the_cap(tmp_path: Path) -> None:
    knowledge = Knowledge(
        PROJECT_A, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path, session_id="s"
    )
    with pytest.raises(InvalidInput, match=rf"^content: must be at most {NOTE_BYTES} bytes"):
        knowledge.store("big", "word " * (NOTE_BYTES // 5 + 1))
    content = KNOWLEDGE.input_schema(locked=True)["properties"]["content"]
    assert content["maxLength"] == NOTE_BYTES and str(NOTE_BYTES) in content["description"]


@contextmanager
def stalling_http() -> Iterator[tuple[int, threading.Event]]:
    """A local HTTP server that accepts and then says nothing until released."""
    release = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            release.wait(60)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1], release
    finally:
        release.set()
        listener.close()


def test_remember_answers_while_a_knowledge_call_is_still_running(tmp_path: Path) -> None:
    pool = pool_for(tmp_path / "db", allow_private_hosts=("127.0.0.1",))
    server = build_server(pool, workspace(tmp_path, PROJECT_A))
    order: list[str] = []
    with stalling_http() as (port, release):

        async def body() -> None:
            async with Client(server, mode="legacy") as client:
                await call(client, "memorize", title="Deploy day", content="We deploy on Tuesdays.")

                async def slow() -> None:
                    source = f"http://127.0.0.1:{port}/doc"
                    await call(client, "knowledge", command="read", source=source)
                    order.append("knowledge")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await anyio.sleep(0.5)  # the knowledge call is waiting on the server
                    with anyio.fail_after(30):
                        error, reply = await call(client, "remember", query="deploy day")
                    order.append("remember")
                    assert not error and "Tuesdays" in reply
                    release.set()

        run(body)
    assert order == ["remember", "knowledge"]


def _stdio_server(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        octobrain_cmd("mcp"),
        env=server_env(tmp_path / "data", **env),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()


def _send(proc: subprocess.Popen[bytes], raw: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(raw + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


INITIALIZE = initialize_message()


def test_the_stdio_server_exits_soon_after_stdin_closes_mid_call(tmp_path: Path) -> None:
    with stalling_http() as (port, _release):
        proc = _stdio_server(tmp_path, OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS="127.0.0.1")
        try:
            _send(proc, json.dumps(INITIALIZE).encode())
            assert _answer(proc)["id"] == 1
            _send(proc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            arguments = {"command": "read", "source": f"http://127.0.0.1:{port}/", "scope": ""}
            request = {"name": "knowledge", "arguments": arguments}
            _send(proc, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                    "params": request}).encode())  # fmt: skip
            time.sleep(1.0)  # the call now waits on the HTTP server (fetch timeout 30 s)
            assert proc.stdin is not None
            start = time.monotonic()
            proc.stdin.close()
            proc.wait(timeout=20)
            assert time.monotonic() - start < 5, "the server outlived its client"
        finally:
            _finish(proc)


# ---- malformed protocol input: the same caps on stdio and HTTP, answered --------------------


def test_stdio_answers_oversized_and_overdeep_messages_and_keeps_serving(tmp_path: Path) -> None:
    proc = _stdio_server(tmp_path)
    try:
        _send(proc, json.dumps(INITIALIZE).encode())
        assert _answer(proc)["id"] == 1
        _send(proc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        deep = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": '
        _send(proc, deep + b"[" * 100_000 + b"]" * 100_000 + b"}}")
        refused = _answer(proc)
        assert refused["id"] == 2 and refused["error"]["code"] == -32600
        assert "nested 100002 deep" in refused["error"]["message"]
        _send(proc, b'{"pad": "' + b"x" * (2 << 20) + b'"}')
        refused = _answer(proc)
        assert (
            refused["id"] is None  # no id among its first members
            and refused["error"]["code"] == -32600
            and "over 1,048,576 bytes" in refused["error"]["message"]
        )
        _send(proc, b"{not json")
        assert _answer(proc)["error"]["code"] == -32700
        _send(proc, b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}')
        listed = _answer(proc)
        tools = {tool["name"] for tool in listed["result"]["tools"]}
        assert listed["id"] == 3 and tools == {
            "memorize",
            "remember",
            "forget",
            "knowledge",
            "ingest",
        }
    finally:
        _finish(proc)


def test_http_answers_an_overdeep_body_with_a_json_rpc_error(tmp_path: Path) -> None:
    port = free_port()
    headers = {"Accept": "application/json, text/event-stream"}
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        deep = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": '
        r = http.post("/mcp", content=deep + b"[" * 5000 + b"]" * 5000 + b"}}", headers=headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        r = http.post("/mcp", content=b'{"pad": "' + b"x" * (2 << 20) + b'"}', headers=headers)
        assert r.status_code == 413 and "over 1048576 bytes" in r.json()["error"]["message"]
        # A batch, or another jsonrpc version: the SDK's validator dump (four errors, the input
        # echoed, documentation links) where stdio answers one line.
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        for body, answered_id in [([ping, ping], None), ({**ping, "jsonrpc": "1.0"}, 2)]:
            r = http.post("/mcp", json=body, headers=headers)
            error = r.json()["error"]
            assert r.status_code == 400 and error["code"] == -32600, r.text
            assert r.json()["id"] == answered_id, r.text
            assert "not a JSON-RPC 2.0 message" in error["message"]
            assert "pydantic" not in r.text and "\n" not in error["message"]


def test_a_deeply_nested_config_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    done = subprocess.run(
        octobrain_cmd("config", "show"),
        env={**server_env(tmp_path / "data"), "OCTOBRAIN_CONFIG_PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-500:]
    assert "nested too deeply" in done.stderr


@pytest.mark.parametrize(
    "hostile",
    [
        "file:///",
        "file:///etc",
        "file://{repo}/../../../../../",
        "file:///%2e%2e/%2e%2e/etc",
        "file://{home}",
        "file://{home}/.ssh",
        "file://{home}/.config/gcloud",
    ],
)
def test_a_client_root_that_is_the_system_or_home_is_not_read_from(
    tmp_path: Path, monkeypatch: Any, hostile: str
) -> None:
    # Before: every file:// root the client named became readable: /etc/passwd was read.
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "secret.md").write_text("# Key\n\nthe private key text\n")
    # A home's hidden directories hold its credentials (~/.ssh, ~/.aws, ~/.config/gcloud).
    for hidden in (".ssh", ".config/gcloud"):
        (tmp_path / "home" / hidden).mkdir(parents=True)
        (tmp_path / "home" / hidden / "id.md").write_text("# Key\n\nthe private key text\n")
    uri = hostile.format(repo=project.as_posix(), home=(tmp_path / "home").as_posix())

    roots = _roots(project.as_uri(), uri)

    server = build_server(pool_for(tmp_path / "db"), workspace(project))
    calls = [
        {"command": "read", "source": "/etc/passwd"},
        {"command": "read", "source": str(tmp_path / "home" / "secret.md")},
        {"command": "read", "source": str(tmp_path / "home" / ".ssh" / "id.md")},
        {"command": "read", "source": str(tmp_path / "home" / ".config" / "gcloud" / "id.md")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (etc, passwd), (home, secret), (ssh, key), (cloud, token), (ok, notes) = _knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert etc and "root:" not in passwd, passwd
    assert home and "private key" not in secret, secret
    assert ssh and cloud and "private key" not in key + token, (key, token)
    assert not ok and "rotates every quarter" in notes  # the project root still reads


@pytest.mark.parametrize("root", ["named before it exists", "the project, replaced"])
def test_a_root_swapped_for_a_link_to_the_home_later_is_not_read_from(
    tmp_path: Path, monkeypatch: Any, root: str
) -> None:
    # Roots were checked once, when the session took them: a client writing in its own
    # directory made a root it named a link to ~/.ssh afterwards, and the key was read.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id.md").write_text("# Key\n\nthe private key text\n")
    monkeypatch.setenv("HOME", str(home))
    project = _project(tmp_path)
    later = tmp_path / "later" if root == "named before it exists" else project
    monkeypatch.chdir(tmp_path)
    server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path))
    replies: list[tuple[bool, str]] = []

    async def body() -> None:
        roots = _roots(project.as_uri(), later.as_uri())
        async with Client(server, mode="legacy", list_roots_callback=roots) as c:
            replies.append(await call(c, "knowledge", command="read", source="notes.md"))
            if later == project:
                project.rename(tmp_path / "project.old")
            later.symlink_to(home / ".ssh")
            for source in (later / "id.md", home / ".ssh" / "id.md"):
                replies.append(await call(c, "knowledge", command="read", source=str(source)))

    run(body)
    (first, notes), *swapped = replies
    assert not first and "rotates every quarter" in notes, notes
    for error, reply in swapped:
        assert error and "private key" not in reply, reply
        assert reply.startswith("source: ") and "knowledge.allow_paths" in reply, reply


def test_a_root_with_a_nul_is_ignored_not_the_end_of_the_session(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)

    roots = _roots(project.as_uri() + "%00x")

    server = build_server(pool_for(tmp_path / "db"), workspace(project))

    async def body() -> None:
        async with Client(server, mode="legacy", list_roots_callback=roots) as c:
            # Before: "internal error (ValueError: embedded null byte)" on every call.
            error, reply = await call(c, "memorize", title="Plain fact", content="x" * 20,
                                      scope=PROJECT_A)  # fmt: skip
            assert not error, reply

    run(body)
