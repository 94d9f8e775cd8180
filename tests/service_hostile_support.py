"""What the tests of the resident service in a messy local environment share: a data dir and
runtime directory of the test's own, and the CLI run in a process of its own."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.service_support import env as service_env  # noqa: F401  (the `env` fixture)

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


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "octobrain", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=env["OCTOBRAIN_DATA_DIR"].rsplit("/", 1)[0],
    )
