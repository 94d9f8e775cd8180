"""The resident service in a messy local environment: a Ctrl-C while it runs a command, a
runtime directory or socket path it cannot use, something else listening on its socket, and
the services of other environments (`service status --all`, `service stop --all`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from octobrain.cli.service_client import PROTOCOL, Channel, ask
from octobrain.cli.service_settings import load_settings
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)
from tests.service_support import wait_for

SCOPE = "github.com/acme/hostile"


@pytest.fixture
def env(service_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir with the service enabled, its service stopped at the end."""
    return service_env


def _cli(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """The command as a terminal starts it: with Ctrl-C's default disposition (a test run
    started in the background of a shell ignores SIGINT, and its children would too)."""
    return subprocess.Popen(
        [sys.executable, "-m", "octobrain", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=env["OCTOBRAIN_DATA_DIR"].rsplit("/", 1)[0],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


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


def test_a_listener_answering_garbage_on_the_socket_is_replaced_by_a_service(
    env: dict[str, str],
) -> None:
    # Before: a program answering what no service says was left on the socket for good, every
    # command ran in-process and `service status` said "not running".
    settings = load_settings()
    assert settings is not None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(settings.socket_path)
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def answer_garbage() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=answer_garbage)
    thread.start()
    try:
        done = _cli(env, "memory", "--scope", SCOPE, "recent")
        out, err = done.communicate(timeout=120)
        assert (done.returncode, out) == (0, b"No memories yet.\n"), err
        assert wait_for(lambda: ask(settings, "status") is not None, 90), "garbage kept the socket"
    finally:
        stop.set()
        thread.join()
        listener.close()


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "octobrain", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=env["OCTOBRAIN_DATA_DIR"].rsplit("/", 1)[0],
    )


def test_status_and_stop_all_find_the_services_of_other_environments(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: a service started with another data dir or OCTOBRAIN_* variable was invisible to
    # `service status` and `stop`, holding its memory for its idle time; --all did not exist.
    other = {**env, "OCTOBRAIN_DATA_DIR": str(tmp_path / "other")}
    limited = {**env, "OCTOBRAIN_SEARCH_DEFAULT_LIMIT": "3"}
    pids = []
    for each in (env, other, limited):
        started = _run(each, "service", "start", "--wait", "90")
        assert started.returncode == 0, started.stderr
        pids.append(int(started.stdout.split()[2].rstrip(",")))
    listed = _run(env, "service", "status", "--all")
    assert listed.returncode == 0, listed.stderr
    lines = sorted(listed.stdout.splitlines(), key=lambda line: int(line.split()[1].rstrip(",")))
    assert [int(line.split()[1].rstrip(",")) for line in lines] == sorted(pids)
    by_pid = dict(zip(sorted(pids), lines, strict=True))
    assert f"data {tmp_path / 'data'}, config" in by_pid[pids[0]]
    assert "(this one)" in by_pid[pids[0]]
    assert f"data {tmp_path / 'other'}, config" in by_pid[pids[1]]
    assert "environment: OCTOBRAIN_SEARCH_DEFAULT_LIMIT not set here" in by_pid[pids[2]]
    shown = json.loads(_run(other, "service", "status", "--all", "--format", "json").stdout)
    assert sorted(row["pid"] for row in shown) == sorted(pids)
    assert [row["pid"] for row in shown if row["this"]] == [pids[1]]
    stopped = _run(env, "service", "stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert sorted(stopped.stdout.splitlines()) == sorted(f"stopped pid {pid}" for pid in pids)
    assert _run(limited, "service", "status", "--all").stdout.startswith("no service running")


def test_status_and_stop_in_another_environment_name_the_service_of_this_data_dir(
    env: dict[str, str],
) -> None:
    # Before: from a shell without the AWS keys a service was started with (one service per
    # environment), `service status` said "not running (enabled); socket …" and `service stop`
    # "not running", while it ran on that data dir.
    keyed = {**env, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"}
    started = _run(keyed, "service", "start", "--wait", "90")
    assert started.returncode == 0, started.stderr
    pid = started.stdout.split()[2].rstrip(",")
    there = (
        f"a service of this data directory and config file runs under another environment "
        f"(pid {pid}: AWS_ACCESS_KEY_ID not set here): `octobrain service"
    )
    status = _run(env, "service", "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("not running in this environment (enabled); socket ")
    assert status.stdout.splitlines()[1] == f"{there} status --all` lists it"
    shown = json.loads(_run(env, "service", "status", "--format", "json").stdout)
    assert shown["other_environments"] == [
        {"pid": int(pid), "environment": ["AWS_ACCESS_KEY_ID not set here"]}
    ]
    stop = _run(env, "service", "stop")
    assert (stop.returncode, stop.stdout) == (
        0,
        f"not running in this environment; {there} stop --all` stops it\n",
    )
    assert _run(keyed, "service", "stop").stdout == f"stopped pid {pid}\n"


def _unusable(kind: str, base: Path) -> None:
    root = base / "octobrain"
    if kind == "another user's":
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
    elif kind == "a link":
        (base / "elsewhere").mkdir(mode=0o700)
        root.symlink_to(base / "elsewhere")
    elif kind == "open to others":
        root.mkdir()
        root.chmod(0o777)
    else:
        root.write_text("not a directory")


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("another user's", "belongs to uid 65534, not to you (uid {uid})"),
        ("a link", "is a symbolic link (to {base}/elsewhere)"),
        ("open to others", "has mode 0777, open to other users, not 0700"),
        ("a file", "is not a directory"),
    ],
)
def test_service_status_names_what_is_wrong_with_the_runtime_directory(
    env: dict[str, str], kind: str, said: str
) -> None:
    # Before: "unavailable here (no Unix sockets, an unreadable config file, or an unsafe
    # runtime directory)", whichever it was, and every command ran in-process unsaid.
    if kind == "another user's" and os.getuid() != 0:
        pytest.skip("needs root to give a directory away")
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    try:
        _unusable(kind, base)
        done = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "service", "status")
        recent = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "memory", "--scope", SCOPE, "recent")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    wrong = said.format(uid=os.getuid(), base=base)
    assert (done.returncode, done.stderr) == (
        1,
        f"error: service: unavailable: the runtime directory {base}/octobrain {wrong}; "
        "commands run in-process\n",
    )
    assert (recent.returncode, recent.stdout) == (0, "No memories yet.\n")


def test_an_xdg_runtime_dir_of_another_user_is_left_alone(env: dict[str, str]) -> None:
    # `sudo -E octobrain …` (root, with the user's XDG_RUNTIME_DIR) made a root-owned
    # `octobrain` folder in the user's /run/user/<uid>: from then on every command of the
    # user's own found "belongs to uid 0, not to you", and no service, until they removed it.
    if os.getuid() != 0:
        pytest.skip("needs root to give a directory away")
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    try:
        os.chown(base, 12345, -1)
        done = _run({**env, "XDG_RUNTIME_DIR": str(base)}, "service", "status")
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert f"socket /tmp/octobrain-{os.getuid()}/" in done.stdout


def test_service_status_names_a_socket_path_too_long(env: dict[str, str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
    deep = base / ("d" * 90)
    deep.mkdir()
    try:
        done = _run({**env, "XDG_RUNTIME_DIR": str(deep)}, "service", "status")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: service: unavailable: its socket path {deep}/octobrain/")
    assert "bytes, over the 103 a Unix socket takes (a shorter XDG_RUNTIME_DIR)" in done.stderr


def test_a_directory_at_the_socket_path_is_named_not_started_into(env: dict[str, str]) -> None:
    # Each service started there crashed on it (IsADirectoryError removing a stale socket),
    # `service start` waited its 30 s for an answer, and `status` said "not running".
    settings = load_settings()
    assert settings is not None
    os.mkdir(settings.socket_path)
    started = _run(
        {**env, "OCTOBRAIN_SERVICE_WAIT_SECONDS": "5"}, "service", "start", "--wait", "20"
    )
    status = _run(env, "service", "status")
    recent = _run(env, "memory", "--scope", SCOPE, "recent")
    said = (
        f"error: service: unavailable: its socket path {settings.socket_path} is a directory; "
        "remove it (rmdir); commands run in-process\n"
    )
    assert (started.returncode, started.stderr) == (1, said)
    assert (status.returncode, status.stderr) == (1, said)
    assert (recent.returncode, recent.stdout) == (0, "No memories yet.\n")
    assert os.path.isdir(settings.socket_path)  # (the user's to remove)


def test_status_and_stop_from_another_build_do_not_call_the_service_stuck(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: right after an upgrade, `service status` (and `stop`) made the old service step
    # aside and, while it did, said it "holds the lock but gave no answer (stopped, or stuck);
    # `kill PID` ends it", exit 1.
    started = _run(env, "service", "start", "--wait", "90")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split()[2].rstrip(","))
    script = tmp_path / "newer.py"
    script.write_text(
        "import sys\n"
        "import octobrain.cli.service_client as client\n"
        "client._build = 'f' * 24  # (an upgraded install)\n"
        "from octobrain.cli.launch import main\n"
        "main(sys.argv[1:])\n"
    )
    newer = [sys.executable, str(script)]
    status = subprocess.run([*newer, "service", "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"running: pid {pid}, ")
    assert "; of another build of octobrain: the next command replaces it" in status.stdout
    stop = subprocess.run([*newer, "service", "stop"], env=env, capture_output=True, text=True)
    assert (stop.returncode, stop.stdout, stop.stderr) == (0, f"stopped pid {pid}\n", "")


def test_stop_does_not_say_stopped_while_the_service_still_holds_its_lock(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `service stop` waited 10 s for the service that had answered its stop to let go
    # of its lock, then said "stopped pid N", exit 0, whether or not it had (one settling a
    # large store, or wedged after answering).
    import fcntl

    from click.testing import CliRunner

    import octobrain.cli.service as service_cli
    import octobrain.cli.service_client as client
    from octobrain.cli.main import main

    settings = load_settings()
    assert settings is not None
    os.makedirs(os.path.dirname(settings.lock_path), exist_ok=True)
    monkeypatch.setattr(client, "ask", lambda settings_, op, *a, **k: {"pid": 4242})
    monkeypatch.setattr(service_cli, "STOP_SECONDS", 0.3)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # (it listened: it answered)
    listener.bind(settings.socket_path)
    listener.listen(1)
    with listener, open(settings.lock_path, "a") as held:  # the service's lock, still held
        fcntl.flock(held, fcntl.LOCK_EX)
        done = CliRunner().invoke(main, ["service", "stop"])
    assert done.exit_code == 1, done.output
    assert "stopped" not in done.stdout
    assert done.stderr == (
        "error: service: the service (pid 4242) said it stops but still holds its lock "
        "after 0.3 s; `kill 4242` ends it\n"
    )
    done = CliRunner().invoke(main, ["service", "stop"])  # the lock let go: stopped
    assert (done.exit_code, done.stdout) == (0, "stopped pid 4242\n")


def test_start_and_stop_answer_as_json(env: dict[str, str]) -> None:
    # Before: `error: --format: no such option`, exit 2: a script could not read the pid.
    started = _run(env, "service", "start", "--wait", "90", "--format", "json")
    assert started.returncode == 0, started.stderr
    running = json.loads(started.stdout)
    assert set(running) == {"pid", "socket"} and running["socket"].endswith(".sock")
    stopped = _run(env, "service", "stop", "--format", "json")
    assert (stopped.returncode, json.loads(stopped.stdout)) == (0, {"stopped": [running["pid"]]})
    again = _run(env, "service", "stop", "--all", "--format", "json")
    assert (again.returncode, json.loads(again.stdout)) == (0, {"stopped": []})


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


def test_service_status_quotes_a_bad_setting_as_written(env: dict[str, str]) -> None:
    done = _run({**env, "OCTOBRAIN_SERVICE_ENABLED": "maybe"}, "service", "status")
    assert done.returncode == 1
    assert done.stderr.startswith(  # (was got 'maybe', as Python writes it)
        'error: service: unavailable: OCTOBRAIN_SERVICE_ENABLED must be true or false, got "maybe"'
    ), done.stderr
