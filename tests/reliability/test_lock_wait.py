"""A write that waits on a local store's write lock says so on stderr, naming the process that
holds it, and its time-out names that process too (never free space and permissions)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.reliability.test_storage_faults import memorize

SCOPE = "github.com/acme/api"
# The CLI with the write lock's wait cut from 120 s to 3 s.
_WAITER = "import octobrain.store.memories as m; m.LOCK_TIMEOUT_S = 3.0\n" + (
    "from octobrain.cli.main import main; main()"
)


def _write(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """`memory memorize` with a 3 s wait for the lock, and how long it took."""
    args = ["memory", "--scope", SCOPE, "memorize", "-t", "While held", "-c", "A fact here."]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _WAITER, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, time.monotonic() - started


def _held_by(holder: subprocess.Popen[str]) -> None:
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"


@pytest.mark.parametrize("by", ["octobrain", "flock(1)"])
def test_a_write_waiting_on_the_lock_names_its_holder_and_so_does_its_time_out(
    env: dict[str, str], tmp_path: Path, by: str
) -> None:
    # Before: a paused `memory import` (Ctrl-Z) kept every other write waiting 120 s without a
    # word, then "The file lock '…/.write.lock' could not be acquired.; nothing was changed
    # (check free space and permissions)".
    memorize(env, "First fact", "The store exists before the lock is held.")
    db = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    if by == "octobrain":
        script = tmp_path / "hold.py"
        script.write_text(
            textwrap.dedent(
                """
                import sys, time
                from octobrain.store.location import StoreLocation
                with StoreLocation(sys.argv[1]).lock("write", 10):
                    print("held", flush=True)
                    time.sleep(60)
                """
            )
        )
        command = [sys.executable, str(script), str(db)]
        named = "hold.py"
    else:
        if shutil.which("flock") is None or not Path("/proc/locks").exists():
            pytest.skip("needs flock(1) and /proc/locks")
        command = ["flock", "-x", str(db / ".write.lock"), "sh", "-c", "echo held; sleep 60"]
        named = "flock -x"
    holder = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _held_by(holder)
        done, took = _write(env)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # (flock's child holds the lock too)
        holder.communicate()
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert took < 30
    assert "lock" not in done.stdout  # (stdout is an MCP server's protocol)
    said = [line for line in done.stderr.splitlines() if "waiting up to 3 s" in line]
    assert len(said) == 1, done.stderr
    assert f"another process (pid {holder.pid}: {named}" in said[0], said
    assert "holds its write lock" in said[0], said
    [error] = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert f"another process (pid {holder.pid}: {named}" in error, error
    assert "held its write lock" in error and "nothing was changed" in error, error
    assert "free space" not in error, error

    # Let go: the next write goes through at once, and leaves no name behind it.
    done, took = _write(env)
    assert done.returncode == 0 and "Memory stored" in done.stdout, done.stderr
    assert "waiting" not in done.stderr, done.stderr
    assert not (db / ".write.holder.json").exists()
