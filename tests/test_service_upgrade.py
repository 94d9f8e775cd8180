"""The resident service after an upgrade (another build of octobrain, or of a package beside it,
installed while it runs): the next command is answered in-process and a service of the new build
takes over as it ends; `service start` replaces the old one rather than reporting it; `service
stop` waits for a service stepping aside once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli import service, service_client, service_daemon
from octobrain.cli.service_settings import Settings
from tests.service_support import SCOPE, cli, current_settings, exited, fake_service, wait_for
from tests.service_support import env as env  # (the `env` fixture)


def _status(env: dict[str, str]) -> dict[str, object]:
    done = cli(env, "service", "status", "--format", "json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _started(env: dict[str, str]) -> dict[str, object]:
    done = cli(env, "service", "start", "--wait", "90", "--format", "json")
    assert done.returncode == 0, done.stderr
    return _status(env)


def _upgraded(env: dict[str, str], tmp_path: Path) -> tuple[dict[str, str], dict[str, object]]:
    """A service started, then a distribution beside octobrain upgraded (its metadata renamed
    in a package directory on the path, as pip's is: the build a service answers for takes
    it in): the environment, and the old service's status."""
    packages = tmp_path / "site-packages"
    (packages / "lancedb-0.21.0.dist-info").mkdir(parents=True)
    path = os.pathsep.join(p for p in (str(packages), env.get("PYTHONPATH", "")) if p)
    env = {**env, "PYTHONPATH": path}
    old = _started(env)
    (packages / "lancedb-0.21.0.dist-info").rename(packages / "lancedb-0.22.0.dist-info")
    return env, old


def _retired(old: dict[str, object]) -> bool:
    """Whether the service `old` (its status) exits within 30 s."""
    pid = int(old["pid"])  # type: ignore[call-overload]
    return wait_for(lambda: exited(pid), 30)


def test_the_first_command_after_an_upgrade_starts_this_builds_service(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: the command the old service refused ran in-process and started none, and so did
    # the next one while the old service still held its lock: the first two commands after an
    # upgrade loaded the model and the store themselves, and a service came only with the
    # third. Now the first starts one as it ends, which waits for the old one to step aside.
    env, old = _upgraded(env, tmp_path)
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"No memories yet.\n", b"")
    assert _retired(old), "the old service kept running"

    def replaced() -> bool:
        info = _status(env)
        return info["running"] is True and info["pid"] != old["pid"] and bool(info["loaded"])

    assert wait_for(replaced, 60), "no service of this build came after the command"
    new = _status(env)
    assert new["build"] != old["build"] and new["served"] == 0
    again = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (again.returncode, again.stdout) == (0, b"No memories yet.\n")
    assert _status(env)["served"] == 1  # answered by it
    log = Path(current_settings().log_path).read_text()
    assert "stopping: another build of octobrain" in log  # (the old one's, kept)
    assert "took over from the service that stepped aside" in log


def test_service_start_after_an_upgrade_replaces_the_old_service(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: `service start` asked the status, which any build answers, and said "running:
    # pid N" of the old build's service, which stayed until a command came.
    env, old = _upgraded(env, tmp_path)
    new = _started(env)
    assert new["pid"] != old["pid"] and new["build"] != old["build"]
    assert "stale" not in new or not new["stale"]
    assert _retired(old), "the old service kept running"


@contextlib.contextmanager
def _holding_lock(settings: Settings, pid: int = 4242) -> Iterator[list[int]]:
    """The lock held by a service, `pid`, until the caller closes the descriptor it is given
    (the list's one item)."""
    held = [os.open(settings.lock_path, os.O_RDWR | os.O_CREAT, 0o600)]
    try:
        fcntl.flock(held[0], fcntl.LOCK_EX)  # (the old one, still going)
        os.write(held[0], str(pid).encode())
        yield held
    finally:
        for fd in held:
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.contextmanager
def _stepping_aside(settings: Settings) -> Iterator[list[int]]:
    """A service of another build (`_holding_lock`) that refuses every request: it steps aside."""
    refused = {"protocol": service_client.PROTOCOL, "build": "0" * 24, "accepted": False}
    answer = json.dumps(refused).encode() + b"\n"
    with _holding_lock(settings) as held, fake_service(settings.socket_path, answer):
        yield held


def test_service_stop_waits_once_for_a_service_of_another_build(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service of another build refuses a `stop` and steps aside. Before: `stop` waited up to
    # 10 s for it to let go of its lock, then another 10 s (20 s for one slow to go).
    waits: list[float] = []
    gone_by = service_client.gone_by

    def counted(settings_: Settings, deadline: float, pid: int | None = None) -> bool:
        waits.append(deadline)
        return gone_by(settings_, deadline, pid)

    monkeypatch.setattr(service_client, "gone_by", counted)
    monkeypatch.setattr(service_client, "STEP_ASIDE_SECONDS", 0.2)
    monkeypatch.setattr(service, "STOP_SECONDS", 0.2)
    with _stepping_aside(current_settings()):
        done = CliRunner().invoke(service.service, ["stop"])
    assert done.exit_code == 1 and len(waits) == 1, (done.output, waits)
    assert "the service (pid 4242) said it stops but still holds its lock" in done.output


def test_service_stop_of_a_service_a_successor_took_over_from_says_it_stopped(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old build's service steps aside and the new build's successor, waiting for the lock
    # (started by a command it refused, an MCP relay or `service start`), takes it at once.
    # Before: `stop` waited for a free lock, STOP_SECONDS, then said the old one (gone) still
    # held it: "the service (pid 4242) said it stops but still holds its lock", exit 1.
    settings = current_settings()
    gone_by = service_client.gone_by
    monkeypatch.setattr(service, "STOP_SECONDS", 0.2)
    with _stepping_aside(settings) as held:

        def taken_over(settings_: Settings, deadline: float, pid: int | None = None) -> bool:
            os.close(held.pop())  # the old one lets go ...
            held.append(os.open(settings.lock_path, os.O_RDWR))
            fcntl.flock(held[0], fcntl.LOCK_EX)  # ... and its successor takes the lock
            os.ftruncate(held[0], 0)
            os.pwrite(held[0], b"4343", 0)
            return gone_by(settings_, deadline, pid)

        monkeypatch.setattr(service_client, "gone_by", taken_over)
        done = CliRunner().invoke(service.service, ["stop"])
    assert (done.exit_code, done.output) == (0, "stopped pid 4242\n")


def test_service_stop_of_a_service_settling_as_it_exits_waits_for_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service exiting (another `stop` at once, a step-aside for another build, idle) closes
    # its listener and settles its stores before it lets go of its lock. Before: `stop` then
    # said "the service (pid 4242) holds the lock but gave no answer (stopped, or stuck);
    # `kill 4242` ends it", exit 1 (1 of 4 pairs of `service stop` at once, 10,000 memories).
    settings = current_settings()
    gone_by = service_client.gone_by
    _listener_closed(settings)
    with _holding_lock(settings) as held:

        def settled(settings_: Settings, deadline: float, pid: int | None = None) -> bool:
            os.close(held.pop())  # it has settled, and lets go
            return gone_by(settings_, deadline, pid)

        monkeypatch.setattr(service_client, "gone_by", settled)
        done = CliRunner().invoke(service.service, ["stop"])
    assert (done.exit_code, done.output) == (0, "stopped pid 4242\n")


def _listener_closed(settings: Settings) -> None:
    """The socket file of a service that has closed its listener (it exits): nothing listens."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(settings.socket_path)
    listener.close()  # (its socket file stays)


@pytest.mark.parametrize("state", ["stopping", "starting"])
def test_service_status_of_a_service_stopping_or_starting_says_so(
    env: dict[str, str], state: str
) -> None:
    # A service that holds its lock (and its memory) with nothing listening: one settling its
    # stores as it exits (asked to stop, stepping aside for another build, idle), its socket
    # file still there, or a successor that has taken the lock and not yet opened its socket.
    # Before: "not running (enabled); socket …", and `--all` said "stuck": "stopping" of both.
    settings = current_settings()
    if state == "stopping":
        _listener_closed(settings)
    with _holding_lock(settings):
        said = CliRunner().invoke(service.service, ["status"])
        data = CliRunner().invoke(service.service, ["status", "--format", "json"])
        every = CliRunner().invoke(service.service, ["status", "--all", "--format", "json"])
    socket_path = str(settings.socket_path)
    assert (said.exit_code, said.output) == (
        0,
        f"{state}: pid 4242 (enabled); socket {socket_path}\n",
    )
    assert (data.exit_code, json.loads(data.output)) == (
        0,
        {"running": False, "enabled": True, state: True, "pid": 4242, "socket": socket_path},
    )
    assert json.loads(every.output) == [{"running": False, "pid": 4242, state: True}]


def test_service_stop_of_a_successor_not_listening_yet_stops_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A successor (the new build's service, started by a command the old one refused) that has
    # taken the lock but not yet opened its socket when `stop` asks. Before: `stop` took it for
    # one exiting and waited for it to let go: "the service (pid N) said it stops but still
    # holds its lock after 10 s; `kill N` ends it", exit 1, and the successor served on.
    settings = current_settings()
    monkeypatch.setattr(service_daemon.Service, "_load", lambda self: None)
    looked = service_client.lock_state
    serving: list[threading.Thread] = []
    with _holding_lock(settings, os.getpid()) as held:  # (the successor: a thread of this test)

        def release() -> None:
            os.unlink(settings.socket_path)
            os.close(held.pop())

        def opening(settings_: Settings) -> str | None:
            state = looked(settings_)
            if state == "starting" and not serving:  # it opens its socket just after this look
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(settings.socket_path)
                listener.listen(8)
                runner = service_daemon.Service(settings)
                serving.append(threading.Thread(target=runner.serve, args=(listener, release)))
                serving[0].start()
            return state

        monkeypatch.setattr(service_client, "lock_state", opening, raising=False)
        done = CliRunner().invoke(service.service, ["stop"])
        for thread in serving:
            thread.join(60)
    assert (done.exit_code, done.output) == (0, f"stopped pid {os.getpid()}\n")
    assert serving and not service_client.service_alive(settings)


def test_service_stop_of_a_service_that_never_opens_its_socket_names_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stopped or stuck between taking its lock and opening its socket. Before: "the service
    # (pid 4242) said it stops but still holds its lock", though it had said nothing.
    monkeypatch.setattr(service, "STOP_SECONDS", 0.2)
    with _holding_lock(current_settings()):
        done = CliRunner().invoke(service.service, ["stop"])
    assert (done.exit_code, done.output) == (
        1,
        "error: service: the service (pid 4242) took the lock but has not opened its socket "
        "within 0.2 s (stopped, or stuck); `kill 4242` ends it\n",
    )


def test_service_stop_leaves_no_successor_waiting_to_take_over(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # After an upgrade, a hook the old build's service refused started the new build's, which
    # waits for the old one's lock; then `service stop`. Before: once the old one let go, the
    # successor took the lock and served on, and loaded the model and the store, though the
    # user had asked for no service ("not running" or "stopped pid N", then a service again).
    settings = current_settings()
    served: list[service_daemon.Service] = []
    monkeypatch.setattr(service_daemon.Service, "serve", lambda self, *_: served.append(self))
    gone_by = service_client.gone_by
    with _stepping_aside(settings) as held:
        successor = threading.Thread(
            target=service_daemon.run_service, args=(settings,), kwargs={"succeed": True}
        )

        def let_go(settings_: Settings, deadline: float, pid: int | None = None) -> bool:
            os.close(held.pop())  # the old one lets go: the successor takes its lock
            successor.join(60)
            return gone_by(settings_, deadline, pid)

        monkeypatch.setattr(service_client, "gone_by", let_go)
        successor.start()
        done = CliRunner().invoke(service.service, ["stop"])
    assert (done.exit_code, done.output) == (0, "stopped pid 4242\n")
    assert not successor.is_alive() and served == [], "the successor took over after the stop"
    assert not service_client.service_alive(settings)
    # A command that reached the old one in its last 0.2 s (after the stop asked) was refused,
    # ran in-process and started a successor as it exited, after the stop returned. Before: the
    # first successor had taken the word away, so this one served on, though no command came
    # after the stop. The next command's service (an ordinary start) serves, as without one.
    assert service_daemon.run_service(settings, succeed=True) == 0
    assert served == [], "a second successor took over after the stop"
    assert service_daemon.run_service(settings) == 0
    assert len(served) == 1, "a command after the stop started no service"


def test_a_service_asked_to_stop_before_it_loads_skips_the_load(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service started by a command loads once that command ends. Asked to stop (or to step
    # aside for another build) before then, it went on to load the model and the store when
    # the command ended, seconds of CPU, and only then let go of its lock (its successor
    # waiting). Now it skips the load.
    settings = current_settings()
    loads: list[service_daemon.Service] = []
    prepared = threading.Event()
    prepare = service_daemon.Service.prepare

    def prepare_once(self: service_daemon.Service) -> None:
        prepare(self)
        prepared.set()

    monkeypatch.setattr(service_daemon.Service, "_load", lambda self: loads.append(self))
    monkeypatch.setattr(service_daemon.Service, "prepare", prepare_once)
    spawner, command = os.pipe()  # the command that started it, still running
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(settings.socket_path)
    listener.listen(8)
    runner = service_daemon.Service(settings, spawner)
    serving = threading.Thread(target=runner.serve, args=(listener,))
    serving.start()
    try:
        assert service_client.ask(settings, "stop") is not None
    finally:
        serving.join(60)
        os.close(command)  # the command ends
        os.unlink(settings.socket_path)
    assert prepared.wait(60) and loads == [], "it loaded as it stopped"
