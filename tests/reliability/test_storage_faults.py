"""A full disk or a read-only data dir: a clear one-line error, and a store that still opens
with every acknowledged memory in it."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXE = str(Path(sysconfig.get_path("scripts")) / "octobrain")


def octobrain(
    env: dict[str, str],
    *args: str,
    preexec: Callable[[], None] | None = None,
    group: str = "memory",
    scoped: bool = True,  # off for the commands on every scope, which refuse `--scope`
) -> subprocess.CompletedProcess[str]:
    scope = ["--scope", "github.com/acme/api"] if scoped else []
    return subprocess.run(
        [EXE, group, *scope, *args],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=preexec,
        timeout=120,
        check=False,
    )


def memorize(env: dict[str, str], title: str, content: str) -> str:
    done = octobrain(env, "memorize", "-t", title, "-c", content, "--format", "json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def stored_ids(env: dict[str, str]) -> set[str]:
    done = octobrain(env, "recent", "-l", "1000", "--format", "json")
    assert done.returncode == 0, done.stderr
    return {m["id"] for m in json.loads(done.stdout)}


def one_clear_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def small_disk() -> None:
    """In the child: files may not grow past 2.5 kB, as on a disk that is about to fill up."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (2500, 2500))


def test_full_disk_is_a_clear_error_and_loses_nothing(env: dict[str, str]) -> None:
    kept = {
        memorize(env, f"Decision {i}", f"Small fact number {i} worth keeping.") for i in range(2)
    }
    failed = octobrain(env, "memorize", "-t", "A big note", "-c", "x" * 6000, preexec=small_disk)
    assert failed.returncode == 1
    line = one_clear_line(failed.stderr)
    assert line.startswith("error: store: cannot write to ") and "File too large" in line
    assert stored_ids(env) == kept  # the refused write left no trace, the others are intact
    assert memorize(env, "After the disk freed up", "Writes work again once there is space.")


def test_read_only_data_dir_refuses_writes_but_still_answers(
    env: dict[str, str], frozen: Callable[[], None]
) -> None:
    mid = memorize(env, "Primary database", "Postgres 16 is the primary database.")
    frozen()
    refused = octobrain(env, "memorize", "-t", "Another fact", "-c", "This cannot be written.")
    assert refused.returncode == 1
    line = one_clear_line(refused.stderr)
    assert line.startswith("error: store: cannot write to ")
    found = octobrain(env, "remember", "postgres database", "--format", "json")
    assert found.returncode == 0, found.stderr  # access counting is skipped, the answer is not
    assert [r["id"] for r in json.loads(found.stdout)["results"]] == [mid]


def test_full_disk_while_indexing_knowledge_is_a_clear_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    def knowledge(*args: str, preexec: Callable[[], None] | None = None) -> Any:
        return octobrain(env, *args, preexec=preexec, group="knowledge")

    small, big = tmp_path / "small.md", tmp_path / "big.md"
    small.write_text("# Ports\n\nThe API listens on port 8443.\n")
    big.write_text("# Long\n\n" + "A sentence about nothing in particular. " * 400)
    assert knowledge("index", str(small)).returncode == 0
    failed = knowledge("index", str(big), preexec=small_disk)
    assert failed.returncode == 1
    line = one_clear_line(failed.stderr)
    assert line.startswith("error: store: cannot write to ") and "File too large" in line
    found = knowledge("search", "which port does the API listen on", "--format", "json")
    assert found.returncode == 0 and "8443" in found.stdout, found.stderr
