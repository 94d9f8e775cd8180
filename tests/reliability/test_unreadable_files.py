"""A table file that cannot be followed (a link that loops) or that this user may not read (its
mode or owner) is one line naming it and the way out, from every command and `doctor`: never
a traceback, never blamed on free space."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line
from tests.server_support import server_env

NOBODY = 65534


def _store(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]) / "db"


def _newest(folder: Path, pattern: str) -> Path:
    return max(folder.glob(pattern), key=lambda f: (f.stat().st_mtime_ns, f.name))


@pytest.mark.parametrize(("folder", "pattern"), [("data", "*.lance"), ("_versions", "*.manifest")])
def test_a_link_that_loops_in_a_table_is_named_not_a_traceback(
    env: dict[str, str], folder: str, pattern: str
) -> None:
    # `DirEntry.is_file()` raised ELOOP: `doctor` printed a traceback, and every command said
    # "cannot write to …: Too many levels of symbolic links; nothing was changed (check free
    # space and permissions)", naming no file.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    path = _newest(_store(env) / "memories.lance" / folder, pattern)
    path.unlink()
    path.symlink_to(path.name)
    named = f"memories.lance/{folder}/{path.name}"
    for args in (("stats",), ("recent",), ("remember", "durable fact")):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert f"({named} is not a regular file" in line and f"move {named} aside" in line, line
    doctor = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in doctor.stderr, doctor.stderr
    assert doctor.returncode == 1 and f"{named} is not a regular file" in doctor.stdout


@pytest.fixture
def as_other_user() -> Iterator[tuple[dict[str, str], list[str]]]:
    """A data dir, and the command prefix that runs `octobrain` as a user file modes bind:
    root reads every file whatever its mode, so as root the commands run as nobody."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to run as another user")
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # (not under pytest's tmp_path: its folders are open to their owner alone)
    home = Path(tempfile.mkdtemp(prefix="octobrain-modes-"))
    env = {**server_env(home / "data"), "HOME": str(home)}
    try:
        yield env, prefix
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("what", ["data file", "data folder"])
def test_a_table_file_this_user_may_not_read_is_named_with_the_way_out(
    as_other_user: tuple[dict[str, str], list[str]], what: str
) -> None:
    # Lance says only "Permission denied (os error 13)": `recent` and `stats` (and `knowledge
    # search`) printed its RuntimeError as a traceback, and `doctor`'s repair was `memory
    # restore`, which reads the same file.
    env, prefix = as_other_user
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    home = Path(env["HOME"])
    if prefix:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(home)], check=True)
    folder = _store(env) / "memories.lance" / "data"
    path = _newest(folder, "*.lance") if what == "data file" else folder
    path.chmod(0)
    named = str(path.relative_to(_store(env)))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, EXE, *args], env=env, capture_output=True, text=True, timeout=120
        )

    for args in (("stats",), ("recent",)):
        done = run("memory", "--scope", "github.com/acme/api", *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert f"{named} cannot be read by this user" in line, line
        assert f"read and write access to {named}" in line, line
    doctor = run("doctor")
    assert "Traceback" not in doctor.stderr, doctor.stderr
    assert doctor.returncode == 1 and f"{named} cannot be read by this user" in doctor.stdout
    assert "memory restore" not in doctor.stdout, doctor.stdout
