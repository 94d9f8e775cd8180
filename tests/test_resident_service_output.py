"""The resident service answers as in-process: the same output, writes visible both ways, a lost
version an error, the caller's scope, stdin and home its own, its snapshot after it leaves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from octobrain.cli.launch import routable
from octobrain.cli.service_client import ask, service_environment
from tests.service_support import (
    SCOPE,
    assert_same_output,
    cli,
    current_settings,
    exited,
    memorize,
    served_count,
    start_service,
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
