"""`octobrain knowledge …` answered by the resident service: the same bytes and exit codes as
a process of its own, other processes' writes seen, a damaged table reported as such a
process reports it."""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from octobrain.cli.launch import routable
from octobrain.cli.service_client import PROTOCOL, Channel, build_id
from octobrain.cli.service_settings import Settings
from tests.service_support import (
    SCOPE,
    assert_same_output,
    cli,
    current_settings,
    served_count,
    start_service,
    wait_for,
)
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)

if TYPE_CHECKING:
    from octobrain.cli.service_daemon import Service

PORTS = "# Ports\n\nThe API listens on port 8443.\n\n## Cache\n\nRedis caches sessions.\n"


@pytest.fixture
def env(service_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """The service's environment, with ports.md indexed (in-process) in the commands' cwd."""
    (_cwd(service_env) / "ports.md").write_text(PORTS)
    done = knowledge(service_env, "index", "ports.md", service=False)
    assert done.returncode == 0, done.stderr
    return service_env


def _cwd(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]).parent  # (where `cli` runs its commands)


def _db(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]) / "db"


def knowledge(
    env: dict[str, str], *args: str, service: bool = True
) -> subprocess.CompletedProcess[bytes]:
    return cli(env, "knowledge", "--scope", SCOPE, *args, service=service)


def _k(*args: str) -> tuple[list[str], str]:
    return ["knowledge", "--scope", SCOPE, *args], ""


def test_knowledge_commands_that_fetch_index_or_read_stdin_run_in_process() -> None:
    assert routable(["knowledge", "--global", "search", "q"]) and routable(["knowledge", "list"])
    assert routable(["knowledge", "search", "q", "--source", "stored://notes"])
    assert routable(["knowledge", "store", "k", "text"]) and routable(["knowledge", "stats"])
    assert not routable(["knowledge", "index", "f.md"])  # a progress bar; Ctrl-C stops it here
    assert not routable(["knowledge", "search", "q", "--source", "f.md"])  # may index f.md
    assert not routable(["knowledge", "search", "q", "--source=f.md"])
    assert not routable(["knowledge", "read", "https://example.com/a"])  # fetched anew here
    assert not routable(["knowledge", "store", "k", "-"])  # reads stdin
    assert not routable(["knowledge", "search", "--help"])


def test_knowledge_output_through_the_service_is_byte_identical(env: dict[str, str]) -> None:
    assert knowledge(env, "store", "runbook", "Restart the worker first.", service=False).stdout
    start_service(env)
    commands = [
        _k("search", "which port does the API listen on"),
        _k("search", "redis cache", "--format", "json", "--limit", "1"),
        _k("search", "restart", "--source", "stored://runbook"),
        _k("search", "q", "--limit", "0"),  # refused: exit 2
        _k("list"),
        _k("list", "--format", "json"),
        _k("stats", "--format", "json"),
        _k("read", "ports.md", "--max-bytes", "30"),
        _k("read", "stored://runbook"),
        _k("read", "missing.md"),  # an error naming the source
        _k("match", r"port \d+", "-C", "1"),
        _k("match", "redis", "-i", "--source", "ports.md"),
        _k("match", "("),  # a bad pattern
        _k("store", "runbook", "Again."),  # exists already: refused both ways
        _k("delete", "no-such-note"),
        _k("delete-source", "missing.md"),
    ]
    assert_same_output(env, commands)
    assert served_count() == len(commands)


def test_writes_of_other_processes_are_seen_by_the_service_and_its_own_by_them(
    env: dict[str, str],
) -> None:
    start_service(env)
    assert b"8443" in knowledge(env, "search", "which port").stdout  # (its index now warm)
    (_cwd(env) / "deploy.md").write_text("# Deploys\n\nDeploys happen on Tuesday mornings.\n")
    assert knowledge(env, "index", "deploy.md", service=False).returncode == 0
    assert b"Tuesday" in knowledge(env, "search", "when do deploys happen").stdout
    assert knowledge(env, "delete-source", "ports.md", service=False).returncode == 0
    listed = knowledge(env, "list").stdout
    assert b"deploy.md" in listed and b"ports.md" not in listed
    assert knowledge(env, "store", "plan", "Ship on Friday.").returncode == 0
    assert b"Ship on Friday." in knowledge(env, "read", "stored://plan", service=False).stdout
    # A file changed since it was indexed is flagged in a hit as a new process flags it.
    (_cwd(env) / "deploy.md").write_text("# Deploys\n\nDeploys happen on Tuesday evenings.\n")
    assert_same_output(env, [_k("search", "when do deploys happen"), _k("match", "Tuesday")])
    assert served_count() == 6


def _rewrite_chunks(db: Path) -> None:
    [data] = (db / "knowledge_chunks.lance" / "data").glob("*.lance")
    raw = bytearray(data.read_bytes())
    raw[100:-200] = bytes(b ^ 0x5A for b in raw[100:-200])
    data.write_bytes(bytes(raw))


def _lose_newest_chunks_version(db: Path) -> None:
    newest = min((db / "knowledge_chunks.lance" / "_versions").glob("*.manifest"))
    newest.unlink()  # (names count down: the smallest is the newest)


@pytest.mark.parametrize(
    "damage",
    [
        _rewrite_chunks,
        lambda db: shutil.rmtree(db / "knowledge_sources.lance"),
        _lose_newest_chunks_version,
    ],
    ids=["chunk data rewritten", "sources table deleted", "newest chunks version lost"],
)
def test_a_knowledge_table_damaged_under_the_service_is_reported_as_a_new_process_does(
    env: dict[str, str], damage: object
) -> None:
    # Its index of the chunks in memory, the service answered a search from it after the
    # table's data file was rewritten underneath, where a new process fails to read it.
    start_service(env)
    assert knowledge(env, "search", "which port").returncode == 0
    damage(_db(env))  # type: ignore[operator]
    assert_same_output(env, [_k("search", "which port"), _k("list"), _k("stats")])
    assert knowledge(env, "search", "which port", service=False).returncode == 1
    assert served_count() == 4


class _Watched:
    """A lock that tells when someone waits for it (`asked`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.asked = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self.asked.set()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def _hand(service: Service, env: dict[str, str], argv: list[str]) -> Channel:
    """A command line handed to `service` as a client hands it, up to its `hello`."""
    ours, theirs = socket.socketpair()
    threading.Thread(target=service._handle, args=(theirs,), daemon=True).start()
    channel = Channel(ours)
    channel.send(
        {"op": "run", "protocol": PROTOCOL, "build": build_id(), "argv": argv,
         "prog": "octobrain", "cwd": str(_cwd(env)), "stdin": None, "columns": 80}
    )  # fmt: skip
    assert (channel.recv(30) or {}).get("accepted")
    return channel


def _answer(channel: Channel, out: list[bytes]) -> None:
    """Wait for `ready` (20 s at most), say `go`, and add the command's stdout to `out`."""
    with channel.sock:
        assert channel.recv(20) == {"ready": True}
        channel.send({"go": True})
        answer = channel.recv(30)
        while answer in ({"running": True}, {"alive": True}):
            answer = channel.recv(30)
    assert answer is not None and answer["exit"] == 0, answer
    out.append(base64.b64decode(answer["stdout"]))


def test_a_knowledge_command_waiting_for_a_hosted_index_holds_up_no_memory_command(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hosted MCP session's `index` holds the store's knowledge lock for minutes. A knowledge
    # command took its turn first and waited for that lock within it: every memory command
    # behind it waited too and ran in-process after `service.wait_seconds` (6.9 s, not 0.2).
    from octobrain.cli.common import Warm
    from octobrain.cli.service_daemon import Service
    from octobrain.cli.service_stores import BrainCache
    from octobrain.config import load_config

    settings = current_settings()
    service = Service(Settings(True, 60.0, 60.0, "k", settings.runtime_dir, settings.config_file))
    service.cache = cache = BrainCache(load_config(), service.run_lock)
    service.configured.set()
    monkeypatch.setattr(Warm, "brain", cache.brain)
    monkeypatch.setattr(Warm, "knowledge", cache.knowledge)
    cache.pool(str(_cwd(env))).knowledge_lock = index = _Watched()  # type: ignore[assignment]
    listed: list[bytes] = []
    recent: list[bytes] = []
    with index:  # the hosted session's index
        listing = _hand(service, env, ["knowledge", "--scope", SCOPE, "list"])
        lister = threading.Thread(target=_answer, args=(listing, listed), daemon=True)
        lister.start()
        assert index.asked.wait(30)  # the knowledge command waits for the index
        _answer(_hand(service, env, ["memory", "--scope", SCOPE, "recent"]), recent)
        assert recent == [b"No memories yet.\n"] and not listed
    lister.join(60)
    assert b"ports.md" in listed[0]  # run once, after the index
    assert service.served == 2


@pytest.fixture
def quiet_service(monkeypatch: pytest.MonkeyPatch) -> Service:
    """A service object of this environment, the class settings its load changes put back."""
    from octobrain.cli.common import Warm
    from octobrain.cli.service_daemon import Service
    from octobrain.memory.corpus import Corpus
    from octobrain.store.memories import MemoryStore

    kept = [(Warm, "brain"), (Warm, "knowledge"), (Corpus, "leave_tails")]
    kept += [(MemoryStore, "defer_maintenance"), (MemoryStore, "keeps_access")]
    for owner, name in kept:
        monkeypatch.setattr(owner, name, getattr(owner, name))
    return Service(current_settings())


def test_the_service_reads_the_knowledge_tables_in_once_it_is_quiet(
    env: dict[str, str], quiet_service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    # Its first `knowledge search` opened the tables and read every chunk in (0.39 s at 4,500
    # chunks, then 0.07 s); memory was warmed as the service started, knowledge was not.
    caplog.set_level(logging.INFO, "octobrain.cli.service_daemon")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(current_settings().socket_path)
    listener.listen(4)
    serving = threading.Thread(target=quiet_service.serve, args=(listener,))
    serving.start()
    try:
        assert wait_for(lambda: "knowledge tables read in, chunks: 1" in caplog.text, 60), (
            caplog.text
        )
    finally:
        quiet_service.stopping.set()
        serving.join(60)
        os.unlink(current_settings().socket_path)


def test_the_knowledge_warm_up_makes_no_knowledge_tables(service_env: dict[str, str]) -> None:  # noqa: F811
    from octobrain.cli.service_stores import BrainCache
    from octobrain.config import load_config

    cache = BrainCache(load_config(), threading.Lock())
    with cache._lock:
        cache.brain("", Path("/")).warm_up()
    cache.warm_knowledge()
    assert not list(_db(service_env).glob("knowledge_*"))
