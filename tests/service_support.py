"""Helpers for the resident service tests: an environment of its own (data dir, runtime
directory), `octobrain` run as a user runs it, a service started and asked, a process that
starts one as a command does, and a fake service on its socket."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from octobrain.cli.service_client import ask, service_alive
from octobrain.cli.service_settings import Settings, load_settings

SCOPE = "github.com/acme/svc"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    run_dir = tempfile.mkdtemp(prefix="ob-", dir="/tmp")  # short: AF_UNIX paths are short
    values = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:256",
        "OCTOBRAIN_SERVICE_ENABLED": "1",
        "OCTOBRAIN_SERVICE_IDLE_SECONDS": "60",
        "OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED": "false",
        "XDG_RUNTIME_DIR": run_dir,
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    full = {**os.environ, **values}
    yield full
    settings = load_settings()
    if settings is not None:
        ask(settings, "stop")
        # Until no service holds the lock (it lets go last, after removing its socket). A test
        # whose service was killed, or that served a fake one, leaves a socket file no process
        # will remove: waiting for the file to go took 15 s of each such test.
        wait_for(lambda: not service_alive(settings), 15)
    shutil.rmtree(run_dir, ignore_errors=True)


# `octobrain` waiting a minute, not a second, for the service's first answer: a test's fake
# service (a thread of the test's process) may not be run within a second on a loaded machine.
_PATIENT = (
    "from octobrain.cli import service_client; service_client.CONNECT_SECONDS = 60.0; "
    "from octobrain.cli.launch import main; main(prog_name='octobrain')"
)


def cli(
    env: dict[str, str], *args: str, stdin: str = "", service: bool = True, patient: bool = False
) -> subprocess.CompletedProcess[bytes]:
    run_env = {**env, "OCTOBRAIN_SERVICE_ENABLED": "1" if service else "0"}
    return subprocess.run(
        [sys.executable, *(["-c", _PATIENT] if patient else ["-m", "octobrain"]), *args],
        env=run_env,
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
        cwd=env["OCTOBRAIN_DATA_DIR"].rsplit("/", 1)[0],
    )


def wait_for(cond: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def current_settings() -> Settings:
    settings = load_settings()
    assert settings is not None
    return settings


def served_count() -> int:
    info = ask(current_settings(), "status")
    return -1 if info is None else int(info["served"])


def start_service(env: dict[str, str]) -> None:
    done = cli(env, "service", "start", "--wait", "90")
    assert done.returncode == 0, done.stderr
    assert served_count() == 0


def memorize(env: dict[str, str], title: str, content: str, *, service: bool) -> str:
    done = cli(
        env, "memory", "--scope", SCOPE, "memorize", "-t", title, "-c", content,
        "--format", "json", service=service,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def assert_same_output(env: dict[str, str], commands: list[tuple[list[str], str]]) -> None:
    """Each command line (with its stdin) prints the same bytes and exits with the same code
    through the service as in a process of its own."""
    for args, stdin in commands:
        warm = cli(env, *args, stdin=stdin)
        cold = cli(env, *args, stdin=stdin, service=False)
        assert (warm.stdout, warm.stderr, warm.returncode) == (
            cold.stdout,
            cold.stderr,
            cold.returncode,
        ), args


# A process that starts the service the way a command that found none does, then lives on
# until its stdin closes (as the command runs in-process meanwhile).
SPAWNER = """
import sys
from octobrain.cli.service_settings import load_settings
from octobrain.cli.service_client import spawn
assert spawn(load_settings())
print("spawned", flush=True)
sys.stdin.read()
"""


@contextmanager
def spawner_process(env: dict[str, str], code: str = SPAWNER) -> Iterator[subprocess.Popen[str]]:
    """A process running `code`, which prints "spawned" and lives on until its stdin closes."""
    with subprocess.Popen(
        [sys.executable, "-c", code], env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "spawned\n"
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def status_now() -> dict[str, object] | None:
    """The service's status (a loaded machine answers late, not never)."""
    return ask(current_settings(), "status", timeout=5)


@contextmanager
def fake_service(path: str, answer: bytes | None, *, hang_up: bool = False) -> Iterator[None]:
    """A listener that accepts and answers `answer` (None: never answers), then holds the
    connection open, or closes it at once (`hang_up`: a service that died there)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        held: list[socket.socket] = []
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(conn)
            with contextlib.suppress(OSError):  # (a client that gave up has closed its end)
                conn.recv(65536)
                if answer is not None:
                    conn.sendall(answer)
                if hang_up:
                    conn.recv(65536)  # its `go`: the command has begun
            if hang_up:
                conn.close()
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()
        if os.path.exists(path):
            os.unlink(path)


def exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")
