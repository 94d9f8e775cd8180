"""`service status`, `start` and `stop` among the services of other environments and builds: each
found and named, none called stuck, stopped only once its lock is free, answered as JSON."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from octobrain.cli.service_settings import load_settings
from tests.service_hostile_support import _run
from tests.service_hostile_support import env as env  # the fixture, shared
from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)


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


def test_service_status_quotes_a_bad_setting_as_written(env: dict[str, str]) -> None:
    done = _run({**env, "OCTOBRAIN_SERVICE_ENABLED": "maybe"}, "service", "status")
    assert done.returncode == 1
    assert done.stderr.startswith(  # (was got 'maybe', as Python writes it)
        'error: service: unavailable: OCTOBRAIN_SERVICE_ENABLED must be true or false, got "maybe"'
    ), done.stderr
