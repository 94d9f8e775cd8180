"""A FIFO, a folder or a file where the store has something else: one line naming it and the
way out, never a hang."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from octobrain.store.manifest import MANIFEST
from tests.reliability.damage_support import (
    indexed_store,
    run_cli,
    store_dir,
    three_facts,
)
from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line


def test_a_file_in_place_of_the_store_folder_is_one_line_saying_so(env: dict[str, str]) -> None:
    # Before: "cannot write to …/db: File exists; nothing was changed (check free space and
    # permissions)", and `doctor` ended in a FileExistsError traceback.
    three_facts(env)
    shutil.rmtree(store_dir(env))
    store_dir(env).write_text("x", encoding="utf-8")
    for args in (("stats",), ("memorize", "-t", "After the damage", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        assert "is not a folder (a store is one)" in one_clear_line(done.stderr)
    done = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "is not a folder" in one_clear_line(done.stderr)


def test_a_folder_in_place_of_the_write_lock_file_is_named_not_blamed_on_space(
    env: dict[str, str],
) -> None:
    # Before: "cannot write to …: Is a directory; nothing was changed (check free space and
    # permissions)": the user looked at the disk.
    three_facts(env)
    lock = store_dir(env) / ".write.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    done = octobrain(env, "memorize", "-t", "After the damage", "-c", "A new fact here.")
    line = one_clear_line(done.stderr)
    assert done.returncode == 1 and "nothing was changed" in line, line
    assert "a folder where it keeps a file" in line and str(lock) in line, line
    assert "free space" not in line


def test_a_file_in_place_of_a_table_folder_is_named_by_doctor_with_its_way_out(
    env: dict[str, str],
) -> None:
    # Before: `_transactions` a file failed every write ("a table cannot be read (… File
    # exists (os error 17)) … Run `octobrain doctor`") while doctor said "ok: nothing is wrong".
    three_facts(env)
    folder = store_dir(env) / "memories.lance" / "_transactions"
    shutil.rmtree(folder)
    folder.write_text("x", encoding="utf-8")
    done = octobrain(env, "memorize", "-t", "After the damage", "-c", "A new fact here.")
    line = one_clear_line(done.stderr)
    assert done.returncode == 1 and "_transactions is a file where Lance keeps a folder" in line
    assert "move memories.lance/_transactions aside" in line, line
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "memories.lance/_transactions is a file where Lance keeps a folder" in out
    folder.unlink()
    assert run_cli(env, "doctor")[0] == 0
    memorize(env, "After the repair", "A fact written once the folder was moved aside.")


def test_a_fifo_in_place_of_the_store_manifest_is_one_line_not_a_hang(
    env: dict[str, str],
) -> None:
    # Reading a FIFO waits for a writer: every command, `doctor` too, hung for good.
    three_facts(env)
    record = store_dir(env) / "_octobrain" / MANIFEST
    record.unlink()
    os.mkfifo(record)
    try:
        done = octobrain(env, "stats")
    except subprocess.TimeoutExpired:
        pytest.fail("`memory stats` waited on the FIFO")
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert f"_octobrain/{MANIFEST} cannot be read" in line and "not a regular file" in line
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and f"_octobrain/{MANIFEST}: cannot be read" in out, out


def test_a_fifo_in_place_of_the_snapshot_pointer_or_sleep_record_is_not_waited_on(
    env: dict[str, str],
) -> None:
    # Both live in the data dir beside the store and are rebuilt when unusable, but reading
    # a FIFO waits for a writer: `remember`, `stats`, `memorize` and the session-start hook
    # hung for good.
    root = Path(env["OCTOBRAIN_DATA_DIR"])
    root.mkdir(parents=True)
    (root / "config.toml").write_text("[search]\nsnapshot_min_rows = 1\n")
    three_facts(env)
    assert octobrain(env, "remember", "durable fact").returncode == 0  # writes the snapshot
    [current] = (root / "cache" / "snapshots").glob("*/CURRENT")
    [record] = (root / "sleep").glob("*.json")
    for path in (current, record):
        path.unlink()
        os.mkfifo(path)
    for args, answer in ((("remember", "durable fact"), "Fact 1"), (("stats",), "total: 3")):
        try:
            done = octobrain(env, *args)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`memory {args[0]}` waited on a FIFO")
        assert done.returncode == 0 and answer in done.stdout, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
    assert current.is_file() and not current.is_symlink(), "the snapshot was not written again"


def test_doctor_names_a_fifo_in_a_table_instead_of_waiting_on_it(env: dict[str, str]) -> None:
    # Lance opens a FIFO put in place of a data file and waits for a writer: doctor hung.
    three_facts(env)
    data = sorted((store_dir(env) / "memories.lance" / "data").glob("*.lance"))[0]
    data.unlink()
    os.mkfifo(data)
    try:
        rc, out = run_cli(env, "doctor")[:2]
    except subprocess.TimeoutExpired:
        pytest.fail("doctor waited on the FIFO")
    assert rc == 1 and f"memories.lance/data/{data.name} is not a regular file" in out, out


@pytest.mark.parametrize(
    ("name", "fails"),
    [
        (".write.lock", "every write to the memories fails"),
        # (memorize takes only the write lock: "every write … fails" was not true of this one)
        (".manifest.lock", "a restore, a migrate and the first write of a table made on demand"),
    ],
)
def test_doctor_names_a_lock_file_that_is_a_folder(
    env: dict[str, str], name: str, fails: str
) -> None:
    # Every write failed "move it aside, then run `octobrain doctor`", and doctor said ok.
    three_facts(env)
    lock = store_dir(env) / name
    lock.unlink(missing_ok=True)
    lock.mkdir()
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and f"{name}: is a folder, not a lock file: {fails}" in out, out
    lock.rmdir()
    assert run_cli(env, "doctor")[0] == 0


def _each_refused_naming_one_of(
    env: dict[str, str], commands: list[tuple[str, ...]], named: list[str]
) -> None:
    """Each `memory <command>` exits 1 at once with one line naming one of the files `named`
    and the way out, instead of waiting on a FIFO for good."""
    for args in commands:
        try:
            done = octobrain(env, *args)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`memory {args[0]}` waited on the FIFO")
        assert done.returncode == 1, (done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert any(
            f"({n} is not a regular file" in line and f"move {n} aside" in line for n in named
        ), line


@pytest.mark.parametrize("where", ["data", "_versions"])
def test_a_fifo_in_a_table_is_one_line_naming_it_not_a_hang(
    env: dict[str, str], where: str
) -> None:
    # Lance opens the FIFO itself and waits for a writer: every command that opened the table
    # (`stats`, `remember`, `memorize`, the MCP server's first call) hung for good.
    three_facts(env)
    folder = store_dir(env) / "memories.lance" / where
    path = sorted(folder.glob("*.lance" if where == "data" else "*.manifest"))[0]
    path.unlink()
    os.mkfifo(path)
    named = f"memories.lance/{where}/{path.name}"
    _each_refused_naming_one_of(env, [("stats",), ("remember", "durable fact")], [named])


def test_a_fifo_in_an_index_is_one_line_naming_it_not_a_hang(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lance opens an index's files itself when a lookup uses it: `get`, `remember`, `stats`,
    # `forget` and `doctor`, which did not look in `_indices`, waited for good on FIFOs there.
    ids = indexed_store(env, monkeypatch)
    files = sorted((store_dir(env) / "memories.lance" / "_indices").glob("*/*.lance"))
    for path in files:
        path.unlink()
        os.mkfifo(path)
    named = [f"memories.lance/_indices/{f.parent.name}/{f.name}" for f in files]
    commands = [("get", ids[0]), ("remember", "durable fact"), ("stats",)]
    _each_refused_naming_one_of(env, commands, named)
    try:
        rc, out = run_cli(env, "doctor")[:2]
    except subprocess.TimeoutExpired:
        pytest.fail("doctor waited on the FIFO")
    assert rc == 1 and any(f"{n} is not a regular file" in out for n in named), out
