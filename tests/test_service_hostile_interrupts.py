"""The resident service and its clients interrupted: a Ctrl-C while it runs a command, once or
twice, or once the answer is in, and a client stopped while it holds the service."""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from octobrain.cli.service_client import PROTOCOL, Channel, ask
from octobrain.cli.service_settings import load_settings
from tests.service_hostile_support import SCOPE, _cli, _run
from tests.service_hostile_support import env as env  # the fixture, shared
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)
from tests.service_support import wait_for


class _SlowService:
    """A service that starts the command it is handed and answers only once told to."""

    def __init__(self, path: str, stdout: bytes = b"Memory stored: 1234\n") -> None:
        self.stdout = stdout
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.running = threading.Event()
        self.answer = threading.Event()
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            channel = Channel(conn)
            request = channel.recv(30) or {}  # (its build: this checkout may be edited meanwhile)
            channel.send({"protocol": PROTOCOL, "build": request.get("build"), "accepted": True})
            channel.send({"ready": True})
            if channel.recv(30) != {"go": True}:
                return
            channel.send({"running": True})
            self.running.set()
            self.answer.wait(60)
            with contextlib.suppress(OSError):  # (a client that stopped waiting is gone)
                channel.send({"stdout": _b64(self.stdout), "stderr": "", "exit": 0})

    def close(self) -> None:
        self.answer.set()
        self.thread.join(60)
        self.listener.close()


def _end(client: subprocess.Popen[bytes]) -> None:
    """Kill the client if a failed test left it running, and close its pipes."""
    if client.poll() is None:
        client.kill()
    client.communicate()


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


@contextlib.contextmanager
def _interrupted_once(
    env: dict[str, str],
) -> Iterator[tuple[_SlowService, subprocess.Popen[bytes], bytes]]:
    """A `memorize` the (slow) service is running, sent one Ctrl-C: the service, the client and
    what the client said to it; the client and the service are ended after."""
    settings = load_settings()
    assert settings is not None
    service = _SlowService(settings.socket_path)
    client = _cli(env, "memory", "--scope", SCOPE, "memorize", "-t", "Title", "-c", "Content")
    try:
        assert service.running.wait(60)
        assert client.stderr is not None
        client.send_signal(signal.SIGINT)
        yield service, client, client.stderr.readline() + client.stderr.readline()
    finally:
        _end(client)
        service.close()


def test_a_ctrl_c_while_the_service_runs_the_command_waits_for_its_answer(
    env: dict[str, str],
) -> None:
    # Before: Ctrl-C said "Aborted!" (exit 1) while the service went on and stored the memory.
    with _interrupted_once(env) as (service, client, said):
        service.answer.set()
        out, err = client.communicate(timeout=60)
    assert b"waiting for its answer (Ctrl-C again to stop waiting)" in said, said + err
    assert (client.returncode, out) == (0, b"Memory stored: 1234\n")


def test_a_second_ctrl_c_stops_waiting_and_says_the_effect_is_unknown(
    env: dict[str, str],
) -> None:
    with _interrupted_once(env) as (_, client, said):
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=60)
    assert b"waiting for its answer" in said, said + err
    assert (client.returncode, out) == (1, b"")
    assert err.decode().strip() == (
        "error: service: stopped waiting; the octobrain service goes on with the command and "
        "its effect is unknown (check with `octobrain memory recent`)"
    )


def test_a_ctrl_c_once_the_answer_is_in_leaves_the_answer_and_its_exit_code(
    env: dict[str, str],
) -> None:
    # The service had answered; a Ctrl-C as the client wrote that answer out said "waiting for
    # its answer" and, pressed twice, "Aborted!" (exit 1) with the answer cut, for a command
    # done; one as the client exited killed it (exit 130 after "Memory stored").
    settings = load_settings()
    assert settings is not None
    answer = b"Memory stored: 1234\n" * (1 << 16)  # (more than a pipe holds: written in a while)
    service = _SlowService(settings.socket_path, answer)
    service.answer.set()
    client = _cli(env, "memory", "--scope", SCOPE, "memorize", "-t", "Title", "-c", "Content")
    try:
        # Its first bytes are out: the client holds the answer and waits for the pipe to drain.
        assert select.select([client.stdout], [], [], 60)[0]
        client.send_signal(signal.SIGINT)
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=60)
    finally:
        _end(client)
        service.close()
    assert (client.returncode, err) == (0, b"")
    assert out == answer


# A client stopped (Ctrl-Z) as the service said `ready`, before it could say `go`.
_STOPPED_CLIENT = """
import os, signal, sys
from octobrain.cli import service_run
from octobrain.cli.service_client import Channel
from octobrain.cli.service_settings import load_settings

send = Channel.send

def stop_before_go(channel, message):
    if message == {"go": True}:
        os.kill(os.getpid(), signal.SIGSTOP)
    send(channel, message)

Channel.send = stop_before_go
try:
    code = service_run.run_remote(load_settings(), sys.argv[1:], "octobrain", None)
    print("run by the service", code)
except service_run.Fallback:
    print("runs it here")
"""


def _state(pid: int) -> bytes:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return stat[stat.rfind(b")") + 2 :][:1]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc/PID/stat")
def test_a_client_stopped_while_it_holds_the_service_does_not_hold_up_the_others(
    env: dict[str, str],
) -> None:
    # The service, holding its run lock for the stopped client, waited 10 s for its `go`: every
    # command meanwhile waited 5 s and then ran in-process (a cold start). Now the service sees
    # the client stopped and lets it go; resumed, that client runs its command itself.
    assert _run(env, "service", "start", "--wait", "90").returncode == 0
    args = ["memory", "--scope", SCOPE, "recent"]
    stopped = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_CLIENT, *args], env=env, stdout=subprocess.PIPE
    )
    try:
        assert wait_for(lambda: _state(stopped.pid) == b"T", 60), "the client never stopped"
        other = _run(env, *args)
        assert (other.returncode, other.stdout) == (0, "No memories yet.\n"), other.stderr
        settings = load_settings()
        assert settings is not None
        assert (ask(settings, "status") or {}).get("served") == 1  # the service answered it
        stopped.send_signal(signal.SIGCONT)
        out, _ = stopped.communicate(timeout=60)
        assert out == b"runs it here\n"
    finally:
        if stopped.poll() is None:
            stopped.send_signal(signal.SIGCONT)
            stopped.kill()
            stopped.wait()
