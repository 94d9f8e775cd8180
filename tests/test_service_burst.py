"""A burst of commands after the resident service went away (a SessionStart hook, then
UserPromptSubmit, PostToolUse… within a second or two): the first runs in-process, the others
are answered by a service started for them rather than each loading the model and the store
beside it; a service that never comes up holds none of them past the bound."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from octobrain.cli.service_settings import load_settings
from tests.service_support import SCOPE, cli, memorize, served_count, spawner_process, status_now
from tests.service_support import env as env  # (the `env` fixture)

# A command that finds no service, runs in-process and will start one as it exits: it holds
# the spawn lock until its stdin closes.
_FIRST = """
import sys
from octobrain.cli.service_settings import load_settings
from octobrain.cli.service_client import spawn_at_exit
spawn_at_exit(load_settings())
print("spawned", flush=True)
sys.stdin.read()
"""

# `octobrain` patient with a service starting on a loaded machine (a test's, not a user's).
_PATIENT = (
    "from octobrain.cli import service_client; service_client.CONNECT_SECONDS = 60.0; "
    "service_client.STARTING_SECONDS = 60.0; "
    "from octobrain.cli.launch import main; main(prog_name='octobrain')"
)


def test_a_command_while_another_runs_in_process_is_answered_by_a_service(
    env: dict[str, str],
) -> None:
    # It ran in-process too: four hooks 0.2 s apart each loaded the model and the store, side
    # by side on two cores (2.3-3.4 s each, against 0.9 s alone).
    memorize(env, "Rate limiting", "The API uses a token bucket per key.", service=False)
    remember = ["memory", "--scope", SCOPE, "remember", "token bucket"]
    cli(env, *remember, service=False)  # (a first recall counts an access: see assert_same_output)
    alone = cli(env, *remember, service=False)
    with spawner_process(env, _FIRST) as first:
        assert status_now() is None
        done = subprocess.run(
            [sys.executable, "-c", _PATIENT, *remember],
            env=env, capture_output=True, timeout=120,
            cwd=env["OCTOBRAIN_DATA_DIR"].rsplit("/", 1)[0],
        )  # fmt: skip
        assert (done.stdout, done.stderr, done.returncode) == (
            alone.stdout,
            alone.stderr,
            alone.returncode,
        )
        assert first.poll() is None  # (the first command still runs)
        assert served_count() == 1  # answered by the service it started, not in-process


def test_a_service_that_never_comes_up_holds_a_command_only_so_long(
    env: dict[str, str],
) -> None:
    # A service that took the lock and never binds its socket (stopped, stuck in its imports):
    # the command waits `STARTING_SECONDS` for it, then runs in-process.
    memorize(env, "Rate limiting", "The API uses a token bucket per key.", service=False)
    settings = load_settings()
    assert settings is not None
    remember = ["memory", "--scope", SCOPE, "remember", "token bucket"]
    cli(env, *remember, service=False)  # (a first recall counts an access: see assert_same_output)
    alone = cli(env, *remember, service=False)
    fd = os.open(settings.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        done = cli(env, *remember)
        assert (done.stdout, done.stderr, done.returncode) == (
            alone.stdout,
            alone.stderr,
            alone.returncode,
        )
        assert not os.path.exists(settings.socket_path)  # (no service answered it)
    finally:
        os.close(fd)
