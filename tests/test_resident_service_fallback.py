"""A fallback that always answers: a service silent, dead, wedged, stuck, of another build, or a
stale socket, and the command runs here in bounded time."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from octobrain.cli.service_client import ask, build_id
from octobrain.cli.service_settings import Settings
from tests.service_support import (
    SCOPE,
    cli,
    current_settings,
    fake_service,
    served_count,
    start_service,
    wait_for,
)
from tests.service_support import env as env  # (the `env` fixture)


def test_a_service_silent_during_a_command_is_reported_not_waited_for(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Stopped (SIGSTOP) or stuck after it started the command: the command may have run, so it
    # is not run again here; the client says so once the service stops saying it is alive,
    # instead of waiting out the 600 s a long command may take. One still alive is waited for.
    from octobrain.cli import service_client, service_run

    monkeypatch.setattr(service_run, "ALIVE_SECONDS", 1.0)
    settings = current_settings()
    hello = {"protocol": service_client.PROTOCOL, "build": build_id(), "accepted": True}
    started = [hello, {"ready": True}, {"running": True}]
    lines = [json.dumps(m).encode() + b"\n" for m in started]
    with fake_service(settings.socket_path, b"".join(lines)):
        began = time.monotonic()
        code = service_run.run_remote(settings, ["memory", "recent"], "octobrain", None)
        assert code == 1 and time.monotonic() - began < 10
    err = capsys.readouterr().err
    assert "gave no sign of life for 1 s during the command" in err and "effect is unknown" in err
    with fake_service(settings.socket_path, b"".join(lines)):  # a hook fails open: exit 0
        hook = ["hook", "session-end"]
        assert service_run.run_remote(settings, hook, "octobrain", b"{}") == 0
    assert "effect is unknown" in capsys.readouterr().err
    alive = [json.dumps({"alive": True}).encode() + b"\n"] * 3
    result = json.dumps({"exit": 0, "stdout": "", "stderr": ""}).encode() + b"\n"
    with fake_service(settings.socket_path, b"".join(lines + alive + [result])):
        assert service_run.run_remote(settings, ["memory", "recent"], "octobrain", None) == 0


def test_a_hook_whose_service_died_under_it_runs_here_and_keeps_its_digest(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service closed its socket after it started the command (killed, crashed): a command
    # that may run twice (a read, a hook: the digest is found and refreshed by its session) runs
    # in this process; a SessionEnd does not fire again, and its digest was lost. Any other
    # command is not run again and is reported as before.
    from octobrain.cli import service_client, service_run

    # On a loaded machine the fake's thread answered after the client's second: the client
    # ran the command here, started a real service, and that one took the fake's socket. The
    # clients wait longer for the first answer, and the fake holds the service's lock.
    monkeypatch.setattr(service_client, "CONNECT_SECONDS", 60.0)
    settings = current_settings()
    hello = {"protocol": service_client.PROTOCOL, "build": build_id(), "accepted": True}
    started = b"".join(
        json.dumps(m).encode() + b"\n" for m in [hello, {"ready": True}, {"running": True}]
    )
    with _service_lock(settings), fake_service(settings.socket_path, started, hang_up=True):
        args = ["memory", "--scope", SCOPE, "memorize", "-t", "T", "-c", "Some content here"]
        assert service_run.run_remote(settings, args, "octobrain", None, repeatable=False) == 1
        with pytest.raises(service_run.Fallback):
            service_run.run_remote(settings, ["hook", "session-end"], "o", b"{}", repeatable=True)
        transcript = tmp_path / "t.jsonl"
        said = "We decided to keep the retry budget at three attempts per request."
        entry = {"type": "assistant", "message": {"content": [{"type": "text", "text": said}]}}
        transcript.write_text(json.dumps(entry) + "\n")
        hook = {"session_id": "died-1", "cwd": str(tmp_path), "transcript_path": str(transcript)}
        done = cli(
            env, "hook", "session-end", "--scope", SCOPE, stdin=json.dumps(hook), patient=True
        )
    assert done.returncode == 0, done.stderr
    assert b"the service stopped during the command; running it here" in done.stderr
    shown = cli(env, "memory", "--scope", SCOPE, "recent", "--format", "json", service=False)
    (digest,) = json.loads(shown.stdout)
    assert "Session digest" in digest["title"] and said in digest["content"]


@contextmanager
def _service_lock(settings: Settings) -> Iterator[None]:
    """Hold the service's lock: a fake service looks alive, so no new service replaces it."""
    lock = os.open(settings.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)


def test_wedged_service_falls_back_in_bounded_time(env: dict[str, str]) -> None:
    settings = current_settings()
    with _service_lock(settings), fake_service(settings.socket_path, None):
        start = time.monotonic()
        done = cli(env, "memory", "--scope", SCOPE, "recent")
        elapsed = time.monotonic() - start
    assert done.returncode == 0 and done.stdout == b"No memories yet.\n"
    assert elapsed < 60


def test_stale_socket_file_falls_back_and_is_replaced(env: dict[str, str]) -> None:
    settings = current_settings()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(settings.socket_path)
    stale.close()  # the file stays; nothing listens
    assert os.path.exists(settings.socket_path)
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert done.returncode == 0 and done.stdout == b"No memories yet.\n"
    assert wait_for(lambda: served_count() == 0, 90), "no new service replaced the stale socket"


def test_service_of_another_build_is_not_used(env: dict[str, str]) -> None:
    settings = current_settings()
    lines = [
        {"protocol": 1, "build": "0" * 24, "accepted": True},
        {"ready": True},
        {"running": True},
        {"stdout": "SGFja2VkCg==", "stderr": "", "exit": 0},  # "Hacked"
    ]
    answer = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    assert build_id() != "0" * 24
    with fake_service(settings.socket_path, answer):
        done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout) == (0, b"No memories yet.\n")


def test_a_stuck_service_is_named_with_its_pid_not_reported_absent(env: dict[str, str]) -> None:
    # Before: a service that held its lock but did not answer (stopped with SIGSTOP, wedged)
    # was "not running" to `service status` and `service stop`, which then did nothing.
    import signal

    start_service(env)
    pid = int(ask(current_settings(), "status")["pid"])  # type: ignore[index]
    os.kill(pid, signal.SIGSTOP)
    try:
        for command in ("status", "stop"):
            done = cli(env, "service", command)
            assert done.returncode == 1, done.stdout
            assert done.stderr.decode() == (
                f"error: service: the service (pid {pid}) holds the lock but gave no answer "
                f"(stopped, or stuck); `kill {pid}` ends it\n"
            )
    finally:
        os.kill(pid, signal.SIGCONT)
    assert cli(env, "service", "stop").stdout.decode() == f"stopped pid {pid}\n"
