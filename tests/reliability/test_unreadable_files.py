"""A table file that cannot be followed (a link that loops) or that this user may not read (its
mode or owner) is one line naming it and the way out, from every command and `doctor`: never
a traceback, never blamed on free space."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
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


def test_a_lock_file_that_is_a_link_that_loops_is_named_with_the_way_out(
    env: dict[str, str],
) -> None:
    # `memorize` said "cannot write to …/db: Too many levels of symbolic links; nothing was
    # changed (check free space and permissions)", and `doctor` "a table cannot be read (…
    # Unable to walk dir … .write.lock …)": Lance lists the tables by walking the folder.
    memorize(env, "Fact 0", "Durable fact number 0 about the API.")
    lock = _store(env) / ".write.lock"
    lock.unlink()
    lock.symlink_to(lock.name)
    done = octobrain(env, "memorize", "-t", "Fact 1", "-c", "x" * 20)
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert f"({lock} is a link that loops" in line and "move it aside" in line, line
    assert "free space" not in line, line
    doctor = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in doctor.stderr and not doctor.stderr, doctor.stderr
    assert doctor.returncode == 1, doctor.stdout
    assert ".write.lock: is a link that cannot be followed" in doctor.stdout, doctor.stdout
    assert f"move {lock} aside" in doctor.stdout, doctor.stdout
    lock.unlink()
    assert octobrain(env, "memorize", "-t", "Fact 1", "-c", "x" * 20).returncode == 0


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


def _three_then_locked(
    as_other_user: tuple[dict[str, str], list[str]], locked: Callable[[Path], Path]
) -> tuple[Callable[..., subprocess.CompletedProcess[str]], str]:
    """Three memories, then the path `locked` gives (from the store) made unreadable: a run
    of `octobrain` as a user the mode binds, and that path as named under the store."""
    env, prefix = as_other_user
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    path = locked(_store(env))
    if prefix:
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", env["HOME"]], check=True)
    path.chmod(0)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, EXE, *args], env=env, capture_output=True, text=True, timeout=120
        )

    return run, str(path.relative_to(_store(env)))


def _data_file(store: Path) -> Path:
    return _newest(store / "memories.lance" / "data", "*.lance")


def _data_folder(store: Path) -> Path:
    return store / "memories.lance" / "data"


@pytest.mark.parametrize("locked", [_data_file, _data_folder])
def test_a_table_file_this_user_may_not_read_is_named_with_the_way_out(
    as_other_user: tuple[dict[str, str], list[str]], locked: Callable[[Path], Path]
) -> None:
    # Lance says only "Permission denied (os error 13)": `recent` and `stats` (and `knowledge
    # search`) printed its RuntimeError as a traceback, and `doctor`'s repair was `memory
    # restore`, which reads the same file; `memorize` said "Permission denied (os error 13);
    # nothing was changed (check free space and permissions)", naming no file.
    run, named = _three_then_locked(as_other_user, locked)
    for args in (("stats",), ("recent",), ("memorize", "-t", "Fact 4", "-c", "x" * 20)):
        done = run("memory", "--scope", "github.com/acme/api", *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert f"{named} cannot be read by this user" in line, line
        assert f"read and write access to {named}" in line, line
    doctor = run("doctor")
    assert "Traceback" not in doctor.stderr, doctor.stderr
    assert doctor.returncode == 1 and f"{named} cannot be read by this user" in doctor.stdout
    assert "memory restore" not in doctor.stdout, doctor.stdout


def test_a_folder_of_access_records_this_user_may_not_read_is_named(
    as_other_user: tuple[dict[str, str], list[str]],
) -> None:
    # `remember` lists `_octobrain/accessed` (the access counts processes left for the next
    # one to commit): a traceback (`PermissionError`), and over MCP "internal error"; `doctor`
    # said "ok: nothing is wrong".
    def accessed(store: Path) -> Path:
        (store / "_octobrain" / "accessed").mkdir(exist_ok=True)
        return store / "_octobrain" / "accessed"

    run, named = _three_then_locked(as_other_user, accessed)
    done = run("memory", "--scope", "github.com/acme/api", "remember", "durable fact")
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert f"{named} cannot be read by this user" in line and "read and write access" in line
    doctor = run("doctor")
    assert doctor.returncode == 1 and f"{named}: cannot be read by this user" in doctor.stdout


def test_a_store_folder_this_user_may_not_read_is_named_not_a_folder_in_it(
    as_other_user: tuple[dict[str, str], list[str]],
) -> None:
    # `remember` named `_octobrain/accessed`, the folder it lists first, inside the `db/` it
    # may not enter; the other commands said "cannot open …/db: Permission denied", no repair.
    run, _ = _three_then_locked(as_other_user, lambda store: store)
    store = _store(as_other_user[0])
    for args in (("memory", "--scope", "github.com/acme/api", "remember", "fact"), ("doctor",)):
        done = run(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert f"{store} cannot be read by this user" in line and "_octobrain" not in line, line
        assert f"read and write access to {store}" in line, line


def test_a_lock_file_this_user_may_not_write_is_named_by_doctor(
    as_other_user: tuple[dict[str, str], list[str]],
) -> None:
    # Every `memorize` failed ("cannot write to …: Permission denied; nothing was changed
    # (check free space and permissions)", naming no file) while `doctor` said "ok: nothing is
    # wrong"; both now name the lock and the repair.
    run, named = _three_then_locked(as_other_user, lambda store: store / ".write.lock")
    memorize = ("memory", "--scope", "github.com/acme/api", "memorize", "-t", "Fact 4")
    done = run(*memorize, "-c", "x" * 20)
    line = one_clear_line(done.stderr)
    assert done.returncode == 1 and "Permission denied" in line, line
    lock = _store(as_other_user[0]) / named
    assert f"({lock} cannot be opened for writing by this user (its mode or owner)" in line
    assert f"read and write access to {lock}" in line and "free space" not in line, line
    # A store this user may not write at all (a read-only copy): the lock is not to blame.
    lock.chmod(0o444)
    _store(as_other_user[0]).chmod(0o555)
    done = run(*memorize, "-c", "x" * 20)
    line = one_clear_line(done.stderr)
    assert done.returncode == 1 and "Permission denied" in line and ".lock" not in line, line
    _store(as_other_user[0]).chmod(0o755)
    lock.chmod(0)
    doctor = run("doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert f"{named}: cannot be opened for writing by this user" in doctor.stdout
    assert "every write to the memories fails" in doctor.stdout


def test_a_raw_lancedb_permission_error_reaching_the_server_is_the_one_line_the_cli_says() -> None:
    # The facades (`Brain`, `Knowledge`) name it; one reaching the server past them was told
    # to the client as "internal error (RuntimeError: lance error: …)" while the CLI said the
    # line below: the server now says the CLI's line.
    from octobrain.server.app import _failure

    raw = RuntimeError("lance error: LanceError(IO): Permission denied (os error 13)")
    told = _failure(raw, "tool remember")
    assert told.startswith("store: a file of the store cannot be read by this user"), told
    assert "read and write access to it (`chmod`, `chown`)" in told, told  # (as doctor says)
    assert "internal error" not in told, told


@pytest.mark.parametrize("name", ["stray", "notes.lance"])
def test_a_link_that_loops_beside_the_tables_is_named(env: dict[str, str], name: str) -> None:
    # `forget`, `export`, `migrate` and `knowledge index` said "a table cannot be read (…
    # Unable to walk dir … Too many levels of symbolic links …); … Run `octobrain doctor`",
    # and `doctor` printed that same line as its own error, naming nothing to move.
    memorize(env, "Fact 0", "Durable fact number 0 about the API.")
    link = _store(env) / name
    link.symlink_to(name)
    done = octobrain(env, "export", "-")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert f"{name}: is a link that cannot be followed" in line, line
    assert f"move {link} aside" in line, line
    doctor = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in doctor.stderr and not doctor.stderr, doctor.stderr
    assert doctor.returncode == 1, doctor.stdout
    assert f"{name}: is a link that cannot be followed" in doctor.stdout, doctor.stdout
    link.unlink()
    assert octobrain(env, "export", "-").returncode == 0


@pytest.mark.parametrize("newer", ["all", "one"])
def test_a_manifest_of_the_other_naming_scheme_is_named_with_the_way_out(
    env: dict[str, str], newer: str
) -> None:
    # A version manifest named as Lance named them before (`5.manifest`) among a table's
    # newer-named ones: every command said "damaged or missing (lance error: Encountered
    # internal error … Found multiple manifest naming schemes …)" with `memory restore` as
    # the repair, which failed the same way, and `doctor` named no file.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    versions = _store(env) / "memories.lance" / "_versions"
    (versions / "5.manifest").write_bytes(b"copied in")
    if newer == "one":  # (one of each scheme: the older scheme's is named) the newest kept
        newer = sorted(versions.glob("?" * 20 + ".manifest"))
        for path in newer[1:]:
            path.unlink()
    named = "memories.lance/_versions/5.manifest"
    for args in (
        ("stats",),
        ("remember", "durable fact"),
        ("memorize", "-t", "Fact 4", "-c", "Another fact."),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert f"{named} is a version manifest named in another" in line, line
        assert f"move {named} aside" in line, line
    doctor = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 1 and f"move {named} aside" in doctor.stdout, doctor.stdout
    (versions / "5.manifest").rename(_store(env) / "5.manifest.aside")
    assert (
        subprocess.run([EXE, "doctor"], env=env, capture_output=True, timeout=120).returncode == 0
    )
    assert octobrain(env, "stats").returncode == 0
