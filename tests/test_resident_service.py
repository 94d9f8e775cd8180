"""The resident service: same output as in-process, writes visible both ways, and a fallback
that always answers (service absent, wedged, stale socket, another build), idle exit."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from octobrain.cli.launch import routable
from octobrain.cli.service_client import PROTOCOL, ask, build_id, service_environment
from octobrain.cli.service_settings import Settings, load_settings
from tests.service_support import (
    SCOPE,
    assert_same_output,
    cli,
    current_settings,
    exited,
    fake_service,
    memorize,
    served_count,
    spawner_process,
    start_service,
    status_now,
    wait_for,
)
from tests.service_support import env as env  # (the `env` fixture)


def test_routable_commands() -> None:
    assert routable(["memory", "--scope", "x/y", "remember", "q"])
    assert routable(["memory", "--global", "memorize", "-t", "t", "-c", "c"])
    assert routable(["hook", "session-start"]) and routable(["brief"])
    assert not routable(["memory", "import", "f.jsonl"])  # progress bars, files: in-process
    assert not routable(["memory", "remember", "--help"])
    assert not routable(["hook", "install"]) and not routable(["mcp"])


def test_service_output_is_byte_identical(env: dict[str, str]) -> None:
    mid = memorize(env, "Rate limiting", "The API uses a token bucket per key.", service=False)
    start_service(env)
    hook_input = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1", "cwd": "/"})
    commands: list[tuple[list[str], str]] = [
        (["memory", "--scope", SCOPE, "get", mid, "--format", "json"], ""),
        (["memory", "--scope", SCOPE, "recent"], ""),
        (["memory", "--scope", SCOPE, "stats", "--format", "json"], ""),
        (["memory", "--scope", SCOPE, "remember", "token bucket"], ""),
        (["memory", "--scope", SCOPE, "get", "not-an-id"], ""),  # an error: stderr, exit 2
        (["memory", "--scope", SCOPE, "memorize", "-t", "abc", "-c", "long enough content"], ""),
        (["memory", "--scope", SCOPE, "memorize"], ""),  # a click usage error
        (["hook", "session-start", "--scope", SCOPE], hook_input),
        (["brief", "--scope", SCOPE], ""),
    ]
    # A first recall counts an access (which raises the memory's decayed importance); the
    # access window then counts repeats once, so both paths below see the same state.
    cli(env, "memory", "--scope", SCOPE, "remember", "token bucket", service=False)
    assert_same_output(env, commands)
    assert served_count() == len(commands)


def test_writes_are_visible_both_ways(env: dict[str, str]) -> None:
    start_service(env)
    through_service = memorize(env, "Deploy window", "Deploys happen on Tuesday.", service=True)
    in_process = memorize(env, "Cache policy", "Sessions are cached in Redis.", service=False)
    got = cli(env, "memory", "--scope", SCOPE, "get", through_service, service=False)
    assert got.returncode == 0 and b"Deploy window" in got.stdout
    got = cli(env, "memory", "--scope", SCOPE, "get", in_process)
    assert got.returncode == 0 and b"Cache policy" in got.stdout
    assert served_count() == 2


def test_a_version_lost_under_a_running_service_is_an_error_not_a_rollback(
    env: dict[str, str],
) -> None:
    # The newest version's manifest lost while the service holds the store open: it must
    # not answer from the version before, nor write on top of it (burying the lost one).
    start_service(env)
    memorize(env, "Deploy window", "Deploys happen on Tuesday.", service=True)
    memorize(env, "Cache policy", "Sessions are cached in Redis.", service=True)
    versions = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / "_versions"
    sorted(versions.glob("*.manifest"))[0].unlink()  # the newest (names count down)
    for args in (["stats"], ["memorize", "-t", "After the loss", "-c", "Must not be written."]):
        done = cli(env, "memory", "--scope", SCOPE, *args)
        assert done.returncode == 1, (args, done.stdout)
        assert b"committed, but the newest version that opens is" in done.stderr, done.stderr
    assert served_count() == 4


def test_absent_service_is_spawned_and_then_used(env: dict[str, str]) -> None:
    assert ask(current_settings(), "status") is None
    first = cli(env, "memory", "--scope", SCOPE, "recent")
    assert first.returncode == 0 and first.stdout == b"No memories yet.\n"
    assert wait_for(lambda: served_count() == 0, 90), "the first command did not start a service"
    assert cli(env, "memory", "--scope", SCOPE, "recent").stdout == b"No memories yet.\n"
    assert served_count() == 1


def test_a_command_refused_for_its_config_starts_no_service(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service it started could not load that config either: it held 80–350 MB for its
    # idle time, and `service status` called it "store loaded".
    monkeypatch.setenv("OCTOBRAIN_SEARCH_MIN_RELEVANCE", "xyz")
    bad = {**env, "OCTOBRAIN_SEARCH_MIN_RELEVANCE": "xyz"}
    done = cli(bad, "memory", "--scope", SCOPE, "recent")
    assert done.returncode == 2 and b"OCTOBRAIN_SEARCH_MIN_RELEVANCE: must be" in done.stderr
    time.sleep(2)
    settings = load_settings()
    assert settings is not None and ask(settings, "status") is None
    assert not os.path.exists(settings.socket_path)


def test_a_command_that_starts_a_service_says_what_is_wrong_with_its_config_once(
    env: dict[str, str],
) -> None:
    # Before it starts the service, as it exits, the command loads the config once more (not
    # for a config it cannot load): its warnings were printed a second time.
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("colour = 1\n")
    done = cli(env, "memory", "--scope", SCOPE, "stats")
    assert done.returncode == 0 and done.stderr.count(b"unknown config key 'colour'") == 1
    assert wait_for(lambda: status_now() is not None, 90), "no service was started"


def test_a_command_that_finds_no_service_starts_one_once_it_is_done(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Started at the command's start, even a service waiting to load took its interpreter's
    # start and imports from the command (0.1 s of 0.7 s on two cores). Here the command is
    # held at its output (a pipe nobody reads): no service may be running yet.
    body = "The deploy pipeline promotes a build from staging to production. " * 60
    for i in range(24):
        memorize(env, f"Deploy step {i}", f"{body} Step {i}.", service=False)
    argv = [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "recent",
            "--limit", "50", "--format", "json"]  # fmt: skip
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, cwd=tmp_path) as proc:
        assert proc.stdout is not None
        first = proc.stdout.read(1)  # its output began: the rest waits for this pipe
        assert first == b"["
        time.sleep(0.5)
        assert proc.poll() is None and status_now() is None
        assert len(first + proc.stdout.read()) > 96 * 1024
        assert proc.wait(60) == 0
    assert wait_for(lambda: (status_now() or {}).get("loaded") is True, 90), status_now()


def test_a_started_service_loads_once_the_command_that_started_it_ends(
    env: dict[str, str],
) -> None:
    # The command that finds no service runs in-process and starts one: loading the same
    # model and store side by side on two cores slowed that command, so the service waits
    # until it has exited (at most a few seconds) before it loads.
    with spawner_process(env) as spawner:
        assert wait_for(lambda: status_now() is not None, 30)
        info = status_now()
        assert info is not None and info["waiting"] is True and info["loaded"] is False, info
        shown = cli(env, "service", "status")
        assert b"store not loaded yet (it loads when the command that started it ends" in (
            shown.stdout
        ), shown.stdout
        assert spawner.stdin is not None
        spawner.stdin.close()  # the command is done
        spawner.wait(30)
    assert wait_for(lambda: (status_now() or {}).get("loaded") is True, 90), status_now()
    assert (status_now() or {}).get("waiting") is False


def test_a_command_sent_to_a_service_still_waiting_is_served_by_it(env: dict[str, str]) -> None:
    with spawner_process(env) as spawner:
        assert wait_for(lambda: status_now() is not None, 30)
        done = cli(env, "memory", "--scope", SCOPE, "recent")
        assert done.returncode == 0 and done.stdout == b"No memories yet.\n", done.stderr
        assert spawner.poll() is None  # (its starter still runs)
        assert served_count() == 1  # the service loaded for it rather than leave it in-process


def test_a_config_edited_before_the_service_loaded_it_is_served_without_a_restart(
    env: dict[str, str],
) -> None:
    # The service took its config's digest as it started and read the config only once the
    # command that started it was done (up to 3 s later): an edit in between was read, yet the
    # next command found the digest changed and retired the service, and ran in-process.
    for n in range(3):
        memorize(env, f"Deploy note {n}", f"We deploy the api blue green, step {n}.", service=False)
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    with spawner_process(env) as spawner:
        assert wait_for(lambda: status_now() is not None, 30)
        config.write_text("[search]\ndefault_limit = 2\n", encoding="utf-8")
        assert (status_now() or {}).get("waiting") is True  # (the edit came before the load)
        assert spawner.stdin is not None
        spawner.stdin.close()
        spawner.wait(30)
    assert wait_for(lambda: (status_now() or {}).get("loaded") is True, 90), status_now()
    done = cli(env, "memory", "--scope", SCOPE, "remember", "deploy api", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["results"]) == 2  # the edited config answered
    assert served_count() == 1  # by the service that loaded it


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


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ")
def test_the_service_hands_large_freed_blocks_back(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With glibc's moving mmap threshold, the blocks Lance and Arrow free on the service's
    # threads stayed in its arenas: 150-280 MB more at 100k memories after bench cold's commands.
    for key in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(key, raising=False)
        env.pop(key, None)
    start_service(env)
    info = ask(current_settings(), "status")
    assert info is not None
    environ = Path(f"/proc/{info['pid']}/environ").read_bytes().split(b"\0")
    assert b"MALLOC_MMAP_THRESHOLD_=131072" in environ
    # A user's own allocator settings stand.
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert service_environment(current_settings())["MALLOC_MMAP_THRESHOLD_"] == "65536"
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576")
    assert "MALLOC_MMAP_THRESHOLD_" not in service_environment(current_settings())
    # The config file is named for the service only when the user named one or there is one:
    # naming a missing default made every warm answer warn that it does not exist.
    settings = current_settings()
    assert not os.path.exists(settings.config_file)
    assert "OCTOBRAIN_CONFIG_PATH" not in service_environment(settings)
    Path(settings.config_file).write_text("[search]\ndefault_limit = 5\n")
    assert service_environment(settings)["OCTOBRAIN_CONFIG_PATH"] == settings.config_file


def test_git_variables_of_a_caller_decide_its_scope_and_never_reach_the_service(
    env: dict[str, str], tmp_path: Path
) -> None:
    # git sets GIT_DIR for a hook in a worktree: the service ran git in its own environment,
    # so such a caller got another project's scope, and a service it started kept GIT_DIR
    # for every later caller.
    repos = {}
    for name in ("api", "web"):
        repos[name] = tmp_path / name
        repos[name].mkdir()
        for args in (
            ["init", "-q"],
            ["remote", "add", "origin", f"https://github.com/acme/{name}"],
        ):
            subprocess.run(["git", *args], cwd=repos[name], check=True)

    def scope(**extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "octobrain", "memory", "stats"],
            env={**env, **extra}, cwd=repos["web"], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[0]

    start_service(env)
    assert scope() == "scope: github.com/acme/web"
    served = served_count()
    assert scope(GIT_DIR=str(repos["api"] / ".git")) == "scope: github.com/acme/api"
    assert served_count() == served  # run in-process
    assert scope() == "scope: github.com/acme/web"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GIT_DIR", str(repos["api"] / ".git"))
        patch.setenv("GIT_EDITOR", "vi")
        assert not any(k.startswith("GIT_") for k in service_environment(current_settings()))


@pytest.mark.parametrize(
    "line",
    [b"{}", b'{"op": "status"}', b'{"op": "run", "protocol": 2, "build": "x"}',
     b'{"op": "run", "protocol": "2", "build": "0123456789abcdef01234567"}', b"[1, 2]"],
)  # fmt: skip
def test_a_request_no_octobrain_client_sends_is_dropped_and_the_service_stays(
    env: dict[str, str], line: bytes
) -> None:
    # Any such request used to read as "another build": the service stepped aside, and the
    # next commands ran cold.
    start_service(env)
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        sock.sendall(line + b"\n")
        assert sock.recv(100) == b""  # closed without an answer
    status = ask(current_settings(), "status")
    assert status is not None and status["pid"] == pid


def test_a_client_gone_before_asking_is_not_logged_as_a_stranger(env: dict[str, str]) -> None:
    # A client killed (or interrupted) as it connected was logged "dropped a request that is
    # not an octobrain client's", as a stranger's request is: 4 lines in the log of 150
    # clients killed 20-90 ms in.
    start_service(env)
    for _ in range(3):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(current_settings().socket_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        sock.sendall(b'{"op": "nonsense"}\n')
        assert sock.recv(100) == b""
    assert ask(current_settings(), "status") is not None
    logged = Path(current_settings().log_path).read_text(encoding="utf-8")
    assert logged.count("dropped a request that is not an octobrain client's") == 1, logged


def test_a_request_past_the_size_bound_is_dropped_unanswered(env: dict[str, str]) -> None:
    # A line without end was kept whole in memory, and grown by copying (quadratic).
    from octobrain.cli.service_daemon import REQUEST_BYTES

    start_service(env)
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    padded = {"op": "status", "protocol": PROTOCOL, "build": build_id(), "pad": "x" * REQUEST_BYTES}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(current_settings().socket_path)
        with contextlib.suppress(OSError):  # the service may close while this is sent
            sock.sendall(json.dumps(padded).encode() + b"\n")
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(100) == b""  # closed without an answer
    status = ask(current_settings(), "status")
    assert status is not None and status["pid"] == pid


def test_a_service_out_of_descriptors_waits_and_serves_again(env: dict[str, str]) -> None:
    # accept() failing with EMFILE escaped the accept loop: the service was gone.
    import resource

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    started = subprocess.run(
        [sys.executable, "-m", "octobrain", "service", "start", "--wait", "90"],
        env=env, capture_output=True, timeout=120, preexec_fn=few_descriptors,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pid = ask(current_settings(), "status")["pid"]  # type: ignore[index]
    held = []
    try:
        for _ in range(120):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(current_settings().socket_path)
            held.append(sock)
        time.sleep(1.0)
    finally:
        for sock in held:
            sock.close()
    assert wait_for(lambda: (ask(current_settings(), "status") or {}).get("pid") == pid, 30)


def test_hook_input_is_decoded_as_the_callers_own_stdin_would_be(env: dict[str, str]) -> None:
    # Under a C locale stdin decodes with surrogateescape: a byte that is not UTF-8 in the
    # hook's JSON gave a briefing in-process but an error through the service.
    hook_input = b'{"hook_event_name": "SessionStart", "session_id": "s\xff1", "cwd": "/"}'
    start_service(env)
    runs = []
    for service in (False, True):
        done = subprocess.run(
            [sys.executable, "-m", "octobrain", "hook", "session-start"],
            env={**env, "LC_ALL": "C", "PYTHONUTF8": "0",
                 "OCTOBRAIN_SERVICE_ENABLED": "1" if service else "0"},
            input=hook_input, capture_output=True, timeout=120,
        )  # fmt: skip
        runs.append((done.returncode, done.stdout, done.stderr))
    assert runs[0] == runs[1] and runs[0][0] == 0 and runs[0][2] == b""


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


def test_idle_service_exits(env: dict[str, str]) -> None:
    env = {**env, "OCTOBRAIN_SERVICE_IDLE_SECONDS": "1"}
    done = cli(env, "service", "start", "--wait", "90")
    assert done.returncode == 0, done.stderr
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), (
        "the idle service kept running"
    )
    assert ask(settings, "status") is None
    status = cli(env, "service", "status")
    assert status.returncode == 0 and status.stdout.startswith(b"not running")


def test_asking_its_status_does_not_keep_an_idle_service_alive(env: dict[str, str]) -> None:
    # Before: each `service status` counted as a request: idle 0 s always, and a status bar
    # asking every few seconds kept the service (hundreds of MB) from ever idling out.
    env = {**env, "OCTOBRAIN_SERVICE_IDLE_SECONDS": "4"}
    done = cli(env, "service", "start", "--wait", "90")
    assert done.returncode == 0, done.stderr
    settings = current_settings()
    idle = []
    for _ in range(2):
        time.sleep(1.5)
        info = ask(settings, "status")
        if info is not None:
            idle.append(float(info["idle_for"]))
    assert idle and idle[-1] >= 1.4, idle
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "kept alive by status"


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


def test_a_dependency_upgraded_beside_it_retires_the_service(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: the fingerprint a service answers for was octobrain's own files only, so after
    # `pip install -U lancedb` (or any package octobrain imports) the running service went on
    # answering every command with the old one loaded.
    packages = tmp_path / "site-packages"  # (a package directory on the path, as pip's is)
    (packages / "lancedb-0.21.0.dist-info").mkdir(parents=True)
    env = {**env, "PYTHONPATH": str(packages)}
    start_service(env)
    pid = int(ask(current_settings(), "status")["pid"])  # type: ignore[index]
    (packages / "lancedb-0.21.0.dist-info").rename(packages / "lancedb-0.22.0.dist-info")
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout) == (0, b"No memories yet.\n")
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "old packages served"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 0)
        assert wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30), "old service kept"


def test_changed_config_file_retires_the_service(env: dict[str, str]) -> None:
    start_service(env)
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[search]\ndefault_limit = 3\n", encoding="utf-8")
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout) == (0, b"No memories yet.\n")
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "stale config served"


def test_a_config_edit_that_keeps_its_size_and_mtime_retires_the_service(
    env: dict[str, str],
) -> None:
    # The service compared the config file's mtime and size: an edit of the same length whose
    # mtime was put back (`touch -d`, `cp -p`, a same-tick edit on a coarse clock) was never
    # seen, and the service answered with the old config for the rest of its life.
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[search]\ndefault_limit = 1\n", encoding="utf-8")
    for n in range(3):
        memorize(
            env, f"Deploy note {n}", f"We deploy the api with blue green, step {n}.", service=False
        )
    start_service(env)
    before = os.stat(config)
    config.write_text("[search]\ndefault_limit = 3\n", encoding="utf-8")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(config).st_mtime_ns, os.stat(config).st_size) == (
        before.st_mtime_ns,
        before.st_size,
    )
    done = cli(env, "memory", "--scope", SCOPE, "remember", "deploy api", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["results"]) == 3
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "the old config served"


def test_starting_a_disabled_service_says_so_at_once(env: dict[str, str], tmp_path: Path) -> None:
    # It waited the whole --wait (30 s) and then said the service "did not answer", pointing
    # to an empty log.
    started = time.monotonic()
    refused = cli(env, "service", "start", "--wait", "60", service=False)
    assert refused.returncode == 1 and time.monotonic() - started < 30
    assert refused.stderr.decode() == (
        "error: service: disabled (OCTOBRAIN_SERVICE_ENABLED=0); every command runs in-process\n"
    )
    status = cli(env, "service", "status", service=False).stdout.decode()
    assert status.startswith("not running (disabled (OCTOBRAIN_SERVICE_ENABLED=0))")
    config = tmp_path / "off.toml"
    config.write_text("[service]\nenabled = false\n")
    by_file = {k: v for k, v in env.items() if k != "OCTOBRAIN_SERVICE_ENABLED"}
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "service", "start"],
        env={**{k: v for k, v in os.environ.items() if k != "OCTOBRAIN_SERVICE_ENABLED"},
             **by_file, "OCTOBRAIN_CONFIG_PATH": str(config)},
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and b"disabled (service.enabled = false)" in done.stderr


@pytest.mark.parametrize("wait", ["nan", "-1", "inf"])
def test_service_start_takes_only_a_bounded_number_of_seconds(
    env: dict[str, str], wait: str
) -> None:
    # Before: nan gave up at once without starting it ("did not answer within nan s"), -1
    # the same, and inf could wait for good.
    done = cli(env, "service", "start", "--wait", wait)
    assert done.returncode == 2 and done.stderr.startswith(b"error: wait: "), done.stderr
    assert b"Traceback" not in done.stderr


def test_after_the_service_leaves_the_next_command_is_served_by_its_snapshot(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service leaves the store's snapshot at the version it last served, so the first
    # command after it (the first hook after ten idle minutes) reads the snapshot alone,
    # without importing LanceDB; the access it counts shows in the next process.
    monkeypatch.setenv("OCTOBRAIN_SEARCH_SNAPSHOT_MIN_ROWS", "1")  # (the service's key too)
    env = {**env, "OCTOBRAIN_SEARCH_SNAPSHOT_MIN_ROWS": "1"}
    start_service(env)
    mids = [memorize(env, f"Note {i}", f"The cache uses setting zq{i}.", service=True)
            for i in range(4)]  # fmt: skip
    assert cli(env, "memory", "--scope", SCOPE, "remember", "setting zq2").returncode == 0
    info = ask(current_settings(), "status")
    assert info is not None and int(info["served"]) == 5
    assert cli(env, "service", "stop").returncode == 0
    assert wait_for(lambda: exited(int(info["pid"])), 60)
    cold = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "octobrain", "memory", "--scope", SCOPE,
         "remember", "setting zq3", "--format", "json"],
        env={**env, "OCTOBRAIN_SERVICE_ENABLED": "0"}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout)["results"][0]["id"] == mids[3]
    assert " lancedb" not in cold.stderr  # (`-X importtime` names every module it imports)
    got = cli(env, "memory", "--scope", SCOPE, "get", mids[3], "--format", "json", service=False)
    assert json.loads(got.stdout)["access_count"] == 1


def test_status_counts_one_command_and_one_session_in_the_singular(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "1 commands served, 1 MCP sessions open".
    from click.testing import CliRunner

    from octobrain.cli.main import main

    info = {"pid": 7, "version": "0", "served": 1, "mcp_sessions": 1, "idle_for": 2.0,
            "idle_seconds": 600.0, "rss_mb": 300.0, "loaded": True, "socket": "s"}  # fmt: skip
    monkeypatch.setattr("octobrain.cli.service_client.ask", lambda settings, what: info)
    shown = CliRunner().invoke(main, ["service", "status"])
    assert shown.exit_code == 0, shown.output
    assert ", 1 command served, 1 MCP session open, idle 2 s" in shown.output, shown.output


@pytest.mark.parametrize("name", ["HOME", "AWS_PROFILE", "XDG_CONFIG_HOME"])
def test_a_client_of_another_home_or_profile_has_a_service_of_its_own(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The same data dir and config file, but ~/.aws, ~/.gitconfig (the scope) and the
    # credentials another user's: its commands must not be answered with this one's.
    monkeypatch.setenv(name, "/tmp/one")
    one = current_settings().socket_path
    monkeypatch.setenv(name, "/tmp/other")
    assert current_settings().socket_path != one
