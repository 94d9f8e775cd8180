"""A damaged store is loud: a lost or unreadable table is one error line naming it and the way
back, never an empty store; `octobrain doctor` finds the damage and exits 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pytest

from octobrain.config import Config, EmbeddingConfig, StorageConfig
from octobrain.memory.brain import Brain
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.manifest import MANIFEST, TableDamaged
from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line
from tests.server_support import server_env
from tests.test_consolidation import twins
from tests.test_object_store import CREDENTIALS, S3


def _store(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]) / "db"


def _three(env: dict[str, str]) -> set[str]:
    return {memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.") for i in range(3)}


def _related(env: dict[str, str]) -> tuple[list[str], Path]:
    """Three memories (their ids, sorted), the first two related, and the one data file of
    `relationships` that link wrote."""
    ids = sorted(_three(env))
    assert octobrain(env, "relate", ids[0], ids[1]).returncode == 0
    [data] = (_store(env) / "relationships.lance" / "data").glob("*.lance")
    return ids, data


def run_cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """`octobrain <args>` (no `--scope`): return code, stdout, stderr."""
    done = subprocess.run(
        [EXE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("damage", ["versions", "directory"])
def test_a_lost_table_is_an_error_and_is_never_recreated(env: dict[str, str], damage: str) -> None:
    _three(env)
    table = _store(env) / "memories.lance"
    shutil.rmtree(table / "_versions" if damage == "versions" else table)
    for args in (("stats",), ("memorize", "-t", "After the damage", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories'" in line and "not re-created" in line, line
        # Not "`memory history` lists the kept versions": none is left, and `history` fails.
        assert "no version of it is left on disk" in line and "backup" in line, line
        assert "total: 0" not in done.stdout
    assert not (table / "_versions").exists(), "the damaged table was re-created"
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "memories" in out and "no version of it is left on disk" in out, out


def test_a_lost_consolidation_journal_is_started_over_not_restored_half_way(
    env: dict[str, str],
) -> None:
    # Before: doctor sent the user to `memory restore`, which marked the store as restoring,
    # failed on the table with no versions left, and left every command refused ("a `memory
    # restore N` was cut short … run it again"), which failed the same way.
    _three(env)
    shutil.rmtree(_store(env) / "consolidations.lance")
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "`octobrain doctor --recreate consolidations`" in out, out
    version = octobrain(env, "history", scoped=False).stdout.splitlines()[1].split()[0]
    done = octobrain(env, "restore", version, "--yes", scoped=False)
    assert done.returncode == 1 and "nothing was changed" in one_clear_line(done.stderr)
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr
    rc, _, err = run_cli(env, "doctor", "--recreate", "consolidations")
    assert rc == 0 and "consolidations: started over, empty" in err, err
    assert run_cli(env, "doctor")[0] == 0
    memorize(env, "After the journal", "A fact written once the journal started over.")
    done = octobrain(env, "restore", version, "--yes", scoped=False)  # (history kept)
    assert done.returncode == 0, done.stderr


def test_a_restore_to_a_version_whose_file_is_gone_is_refused_not_done(
    env: dict[str, str],
) -> None:
    # Before: "restored version 2: now version N", and every read after it failed on the
    # data file only that version used, deleted after a compaction had moved its rows.
    _three(env)
    hashed = Config(embedding=EmbeddingConfig(model="hash:64"))
    Brain("github.com/acme/api", config=hashed, uri=_store(env)).store.compact()
    data = _store(env) / "memories.lance" / "data"
    oldest = min(data.glob("*.lance"), key=lambda f: f.stat().st_mtime_ns)
    oldest.unlink()  # (the compacted file holds its rows: the newest version reads whole)
    done = octobrain(env, "restore", "2", "--yes", scoped=False)
    assert done.returncode == 2, done.stdout
    line = one_clear_line(done.stderr)
    assert "version 2 cannot be read" in line and "nothing was changed" in line, line
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr


def test_history_marks_the_versions_whose_deletion_file_is_gone(env: dict[str, str]) -> None:
    # Before: `memory history` listed them as any other version (the newest too, which every
    # read failed on), and the restore the damage error sends the user to was refused on the
    # one picked: "version 5 cannot be read".
    ids = sorted(_three(env))
    hashed = Config(embedding=EmbeddingConfig(model="hash:64"))
    Brain("github.com/acme/api", config=hashed, uri=_store(env)).store.compact()  # one file
    assert octobrain(env, "forget", "--yes", ids[0]).returncode == 0  # a deletion file in it
    memorize(env, "After the forget", "A fact written after the forget.")
    [deletion] = (_store(env) / "memories.lance" / "_deletions").iterdir()
    deletion.unlink()
    done = octobrain(env, "history", scoped=False)
    newest = done.stdout.splitlines()[0]
    said = f"(damaged: deletion file _deletions/{deletion.name} is gone; it cannot be read"
    assert done.returncode == 0 and said in newest, done.stdout
    rows = json.loads(octobrain(env, "history", "--format", "json", scoped=False).stdout)
    assert [r["memories"] for r in rows if "damage" in r] == [3, 2]  # since the forget
    sound = next(r["version"] for r in rows if "damage" not in r)
    assert octobrain(env, "restore", str(sound), "--yes", scoped=False).returncode == 0
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr


def test_a_file_in_place_of_the_store_folder_is_one_line_saying_so(env: dict[str, str]) -> None:
    # Before: "cannot write to …/db: File exists; nothing was changed (check free space and
    # permissions)", and `doctor` ended in a FileExistsError traceback.
    _three(env)
    shutil.rmtree(_store(env))
    _store(env).write_text("x", encoding="utf-8")
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
    _three(env)
    lock = _store(env) / ".write.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    done = octobrain(env, "memorize", "-t", "After the damage", "-c", "A new fact here.")
    line = one_clear_line(done.stderr)
    assert done.returncode == 1 and "nothing was changed" in line, line
    assert "a folder where it keeps a file" in line and str(lock) in line, line
    assert "free space" not in line


def test_a_manifest_that_lost_table_names_gets_them_back_and_guards_them_again(
    env: dict[str, str],
) -> None:
    # Before: the names stayed lost ("the next write records it" never did), and with the
    # memories and edge directories deleted too, the store opened as a new, empty one
    # ("total: 0"; memorize made a new table; doctor ok).
    _three(env)
    octobrain(env, "consolidate")  # (the journal table, made after the memories)
    record = _store(env) / "_octobrain" / MANIFEST
    record.write_text(json.dumps({"tables": ["consolidations"]}), encoding="utf-8")
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr
    assert {"memories", "relationships"} <= set(json.loads(record.read_text())["tables"])
    assert run_cli(env, "doctor")[0] == 0
    record.write_text(json.dumps({"tables": ["consolidations"]}), encoding="utf-8")
    for name in ("memories", "relationships"):
        shutil.rmtree(_store(env) / f"{name}.lance")
    for args in (("stats",), ("memorize", "-t", "After the loss", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1 and "total: 0" not in done.stdout, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories'" in line and "consolidations, made after it, is here" in line, line
    assert not (_store(env) / "memories.lance").exists()


def test_a_file_in_place_of_a_table_folder_is_named_by_doctor_with_its_way_out(
    env: dict[str, str],
) -> None:
    # Before: `_transactions` a file failed every write ("a table cannot be read (… File
    # exists (os error 17)) … Run `octobrain doctor`") while doctor said "ok: nothing is wrong".
    _three(env)
    folder = _store(env) / "memories.lance" / "_transactions"
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


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_answer_that_cannot_be_written_is_one_line_not_a_traceback(env: dict[str, str]) -> None:
    # Before: `octobrain memory recent > /dev/full` ended in a 40-line OSError traceback.
    _three(env)
    for args in (("recent",), ("export", "-")):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [EXE, "memory", "--scope", "github.com/acme/api", *args],
                env=env,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
                check=False,
            )
        assert done.returncode == 1, done.stderr
        assert done.stderr == "error: output: cannot be written (No space left on device)\n"


def test_doctor_passes_a_healthy_store_and_reports_json(env: dict[str, str]) -> None:
    _three(env)
    rc, out, err = run_cli(env, "doctor", "--format", "json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["ok"] and report["manifest"] == "ok" and report["problems"] == []
    tables = {t["name"]: t for t in report["tables"]}
    assert tables["memories"]["rows_read"] == tables["memories"]["rows_counted"] == 3
    assert {"memories", "relationships"} <= set(tables)


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[10:200] = b"x" * 190
    path.write_bytes(bytes(data))


def test_a_corrupt_data_file_is_one_line_naming_the_table(env: dict[str, str]) -> None:
    _three(env)
    files = sorted((_store(env) / "memories.lance" / "data").glob("*.lance"))
    _corrupt(files[0])
    for args in (
        ("stats",),
        ("remember", "durable fact"),
        ("export", str(_store(env).parent / "x")),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "memories: fragment" in line and "cannot be read" in line, line
        assert "octobrain doctor" in line
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [memories] = [t for t in report["tables"] if t["name"] == "memories"]
    assert len(memories["damaged_fragments"]) == 1 and memories["rows_read"] == 2


@pytest.mark.parametrize("damage", ["removed", "cut short", "emptied", "zeroed at its size"])
def test_a_lost_or_cut_data_file_is_one_line_not_an_endless_search(
    env: dict[str, str], damage: str
) -> None:
    # Such a file fails every read, whatever its range (a zero-length file is what a crash
    # leaves): the search for the damaged fragment used to visit 2**32 ranges, at 100% CPU.
    _three(env)
    data = sorted((_store(env) / "memories.lance" / "data").glob("*.lance"))[0]
    if damage == "removed":
        data.unlink()
    elif damage == "zeroed at its size":  # the size the commit check compares is kept
        data.write_bytes(bytes(data.stat().st_size))
    else:
        data.write_bytes(data.read_bytes()[: 100 if damage == "cut short" else 0])
    for args in (("stats",), ("remember", "durable fact")):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "memories: cannot be read" in line and "octobrain doctor" in line, line
    # A write never reads the old files: it was acknowledged into the damaged table, and the
    # repair (a restore to a version before the damage) would then drop it.
    versions = len(list((_store(env) / "memories.lance" / "_versions").iterdir()))
    done = octobrain(env, "memorize", "-t", "After the damage", "-c", "A new fact here.")
    assert done.returncode == 1 and "Memory stored" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert f"data file {data.name} " in line and "nothing was changed" in line, line
    assert "octobrain memory restore" in line, line
    assert len(list((_store(env) / "memories.lance" / "_versions").iterdir())) == versions
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [problem] = [p for p in report["problems"] if p["table"] == "memories"]
    assert problem["problem"].startswith("cannot be read"), problem


def test_a_data_file_overwritten_at_its_size_is_one_line_naming_the_table(
    env: dict[str, str],
) -> None:
    # Zeros of the file's own size: Lance says the file "does not appear to be a Lance file"
    # as a ValueError without its "lance error" prefix, which export let out as a traceback.
    _, data = _related(env)
    data.write_bytes(bytes(data.stat().st_size))
    done = octobrain(env, "export", str(_store(env).parent / "x.jsonl"))
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert "relationships: cannot be read" in line and "octobrain doctor" in line, line
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "relationships" in out, out


def test_a_fifo_in_place_of_the_store_manifest_is_one_line_not_a_hang(
    env: dict[str, str],
) -> None:
    # Reading a FIFO waits for a writer: every command, `doctor` too, hung for good.
    _three(env)
    record = _store(env) / "_octobrain" / MANIFEST
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


def test_a_zeroed_newest_version_manifest_is_named_not_an_empty_table(
    env: dict[str, str],
) -> None:
    # Lance reads a manifest of zeros as version 0, with no columns: doctor failed with a
    # KeyError traceback, and once the hint was deleted (the repair it named) every command
    # said the store was embedded with '' (dim 0) and to run `memory reembed`.
    _three(env)
    versions = _store(env) / "memories.lance" / "_versions"
    newest = max(versions.glob("*.manifest"), key=lambda f: (1 << 64) - 1 - int(f.stem))
    newest.write_bytes(bytes(newest.stat().st_size))
    for hint in (True, False):
        if not hint:
            (versions / "latest_version_hint.json").unlink()
        done = octobrain(env, "stats")
        assert done.returncode == 1 and "total" not in done.stdout, done.stdout
        line = one_clear_line(done.stderr)
        assert f"_versions/{newest.name}) reads as version 0" in line, line
        assert "run `octobrain memory reembed`" not in line, line
        rc, out = run_cli(env, "doctor")[:2]
        assert rc == 1 and "reads as version 0" in out, out
    # The repair named: the last commit is lost (and octobrain's record of it let go).
    newest.rename(newest.with_suffix(".aside"))
    (_store(env) / "_octobrain" / "versions.json").unlink()
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 2" in done.stdout, (done.stdout, done.stderr)


def test_a_fifo_in_place_of_the_snapshot_pointer_or_sleep_record_is_not_waited_on(
    env: dict[str, str],
) -> None:
    # Both live in the data dir beside the store and are rebuilt when unusable, but reading
    # a FIFO waits for a writer: `remember`, `stats`, `memorize` and the session-start hook
    # hung for good.
    root = Path(env["OCTOBRAIN_DATA_DIR"])
    root.mkdir(parents=True)
    (root / "config.toml").write_text("[search]\nsnapshot_min_rows = 1\n")
    _three(env)
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


def test_a_write_that_meets_a_cut_data_file_names_the_damage_not_free_space(
    env: dict[str, str],
) -> None:
    # `forget` deletes the memories, then their edges: that second commit read the cut
    # relationships file, and its failure sent the user to look for free space, the memory
    # gone already. A link was acknowledged into the cut table, where the repair (a restore
    # to before the damage) would drop it. Each commit now checks both tables' files first.
    ids, data = _related(env)
    data.write_bytes(data.read_bytes()[:100])
    for args in (("forget", ids[0], "-y"), ("relate", ids[1], ids[2])):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "table 'relationships'" in line and f"data file {data.name} holds 100" in line
        assert "nothing was changed" in line and "check free space" not in line, line
    assert octobrain(env, "get", ids[0]).returncode == 0, "forget deleted the memory"


def test_doctor_names_a_fifo_in_a_table_instead_of_waiting_on_it(env: dict[str, str]) -> None:
    # Lance opens a FIFO put in place of a data file and waits for a writer: doctor hung.
    _three(env)
    data = sorted((_store(env) / "memories.lance" / "data").glob("*.lance"))[0]
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
    _three(env)
    lock = _store(env) / name
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
    _three(env)
    folder = _store(env) / "memories.lance" / where
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
    ids = _indexed(env, monkeypatch)
    files = sorted((_store(env) / "memories.lance" / "_indices").glob("*/*.lance"))
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


def test_a_changed_embedding_is_refused_not_ranked_first(env: dict[str, str]) -> None:
    # Lance keeps no checksum of its data pages: four bytes of an embedding changed on disk
    # read back without an error. Scored as stored, that memory was every query's first hit
    # (relevance 1e28), and `doctor` said ok.
    ids = sorted(_three(env))
    table = lancedb.connect(str(_store(env))).open_table("memories")
    rows = table.search().where(f"id = '{ids[0]}'").limit(1).to_arrow()
    vector = np.asarray(rows.column("embedding")[0].as_py(), dtype="<f4").tobytes()
    [data] = [
        f
        for f in (_store(env) / "memories.lance" / "data").glob("*.lance")
        if vector in f.read_bytes()
    ]
    raw = data.read_bytes()
    at = raw.index(vector)
    data.write_bytes(raw[:at] + b"\xde\xad\xbe\xef" + raw[at + 4 :])

    done = octobrain(env, "remember", "durable fact", "--format", "json")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "'memories' is damaged" in line and ids[0] in line, line
    assert "octobrain memory reembed" in line and "octobrain doctor" in line, line
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [problem] = [p for p in report["problems"] if p["table"] == "memories"]
    assert ids[0] in problem["problem"] and "memory reembed" in problem["repair"], problem

    assert octobrain(env, "reembed", scoped=False).returncode == 0
    done = octobrain(env, "remember", "durable fact", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert all(r["relevance"] <= 1 for r in json.loads(done.stdout)["results"])
    assert run_cli(env, "doctor")[0] == 0


def test_a_store_gone_whole_is_refused_not_made_again_empty(env: dict[str, str]) -> None:
    # Its disk not mounted, or its directory deleted: nothing in the store is left to say it
    # existed. A fresh empty store was made in its place, answered `total: 0`, and took the
    # next writes (hidden again once the disk is back); `doctor` said ok.
    _three(env)
    shutil.rmtree(_store(env))
    for args in (("stats",), ("memorize", "-t", "After the loss", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1 and "total: 0" not in done.stdout, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "holds no store, yet this machine used one there" in line, line
        assert "mounted" in line and "to start a new store there" in line, line
    assert not (_store(env) / "memories.lance").exists(), "an empty store was made in its place"
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "holds no store" in out, out

    # Starting over on purpose: the file the error names is deleted.
    Path(line.rsplit("delete ", 1)[1]).unlink()
    memorize(env, "A new start", "The first fact of a new store.")
    assert "total: 1" in octobrain(env, "stats").stdout


def test_a_new_store_first_opened_by_two_processes_at_once_is_no_store_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Memories and knowledge make their tables each under a lock of their own: the knowledge
    # tables' first open listed the store empty, another process made `memories` (leaving the
    # store's mark) before this one read the mark, and a brand-new store was refused as gone.
    from octobrain.knowledge.store import KnowledgeStore
    from octobrain.store import MemoryStore, seen

    uri, real_gone, other = tmp_path / "db", seen.gone, []

    def meanwhile(at: str) -> str | None:
        if not other:  # (the other process's own first open reads the mark too)
            other.append(MemoryStore(uri, "hash:64", 64))
            other[0].open()
        return real_gone(at)

    monkeypatch.setattr(seen, "gone", meanwhile)
    assert KnowledgeStore(uri, "hash:64", 64).sources.count_rows() == 0
    assert other and other[0].count() == 0
    assert seen.mark_of(str(uri)).exists()


def test_a_store_opens_when_the_marks_of_stores_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The marks (`store.seen`) are best effort, yet a `<data dir>/stores` this user may not
    # look into (made by `sudo octobrain …` with a umask of 077) failed every open of a
    # healthy store: `PermissionError` from asking whether its mark was there.
    from octobrain.store import MemoryStore, seen

    uri = tmp_path / "db"
    MemoryStore(uri, "hash:64", 64).open()
    stores, real_stat = seen.mark_of(str(uri)).parent, Path.stat

    def stat(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.parent == stores:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    assert MemoryStore(uri, "hash:64", 64).count() == 0
    assert MemoryStore(tmp_path / "new", "hash:64", 64).count() == 0


def test_a_store_gone_whole_is_refused_however_its_path_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The mark was keyed by the path as spelled: a store used as <disk>/db and gone whole was
    # made again, empty, when reached through a symlink, with `..`, relative to the working
    # directory or with a trailing slash; and each spelling that opened it left a mark of its own.
    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore, seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    disk = tmp_path / "disk"
    (disk / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(disk)
    others = [tmp_path / "link" / "{}", f"{disk}/sub/../{{}}", "disk/{}", f"{disk}/{{}}/"]
    MemoryStore(disk / "db", "hash:64", 64).open()
    shutil.rmtree(disk / "db")
    for uri in others:
        with pytest.raises(StorageError, match="holds no store, yet this machine used one there"):
            MemoryStore(str(uri).format("db"), "hash:64", 64).count()
        assert not (disk / "db" / "memories.lance").exists(), f"made again empty as {uri}"
    for uri in [disk / "{}", *others]:
        MemoryStore(str(uri).format("kept"), "hash:64", 64).open()
    # A mark a store's place, and one for the spelling through a link (the spellings that
    # resolve by name alone need none: `seen` module doc).
    assert len(list((tmp_path / "data" / seen.FOLDER).glob("*.json"))) == 3


def test_a_bucket_prefix_has_one_mark_however_its_uri_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    seen.note_used("s3://team/octobrain")
    for uri in ("s3://team/octobrain/", "s3://team//octobrain", "s3://team/octobrain//"):
        assert seen.mark_of(uri) == seen.mark_of("s3://team/octobrain"), uri
        assert seen.gone(uri) is not None, uri
    assert seen.gone("s3://team/octobrain2") is None and seen.gone("s3://team") is None


def test_a_store_reached_by_a_spelling_is_marked_by_its_place_and_by_the_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Marks were keyed by the path as spelled (here through a symlink): such a mark still
    # refuses the store gone whole, and the store's next open marks its place too, with the
    # spelling's date; deleting the store's mark on purpose deletes both.
    import hashlib

    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore, seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    disk, link = tmp_path / "disk", tmp_path / "link"
    disk.mkdir()
    link.symlink_to(disk)
    MemoryStore(disk / "db", "hash:64", 64).open()
    [mark] = (tmp_path / "data" / seen.FOLDER).glob("*.json")
    mark.unlink()
    digest = hashlib.sha256(str(link / "db").encode()).hexdigest()[:32]
    old = tmp_path / "data" / seen.FOLDER / f"{digest}.json"
    old.write_text(json.dumps({"uri": str(link / "db"), "first_used": 1_600_000_000.0}))

    (disk / "db").rename(disk / "away")  # its disk not mounted
    with pytest.raises(StorageError, match=r"\(since 2020-09-13\)") as refused:
        MemoryStore(link / "db", "hash:64", 64).count()
    assert str(refused.value).endswith(f"delete {old}")
    shutil.rmtree(disk / "db")  # (the lock files the refused open left)
    (disk / "away").rename(disk / "db")  # mounted again

    assert MemoryStore(link / "db", "hash:64", 64).count() == 0
    assert old.exists() and sorted(old.parent.glob("*.json")) == sorted([old, mark])
    assert json.loads(mark.read_text()) == {"uri": str(disk / "db"), "first_used": 1_600_000_000.0}
    seen.forget(str(link / "db"))
    assert list(old.parent.glob("*.json")) == []


def test_a_store_reached_through_a_link_on_its_own_disk_is_refused_while_the_disk_is_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `storage.uri = /mnt/x/current/db`, `current` a link to `releases/7` on that disk: with
    # the disk away the path resolves to nothing like the store's real place, so a mark by
    # the place alone let an empty store be made there.
    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    disk = tmp_path / "mnt" / "x"
    (disk / "releases" / "7").mkdir(parents=True)
    (disk / "current").symlink_to("releases/7")
    MemoryStore(disk / "current" / "db", "hash:64", 64).open()
    away = tmp_path / "unmounted"
    disk.rename(away)
    disk.mkdir()  # the empty mount point
    with pytest.raises(StorageError, match="holds no store, yet this machine used one"):
        MemoryStore(disk / "current" / "db", "hash:64", 64).count()
    assert not (disk / "current" / "db" / "memories.lance").exists()


def test_a_lost_table_is_an_error_even_with_the_manifest_lost_too(env: dict[str, str]) -> None:
    # Nothing records the table any more, but relationships, which is only ever made after
    # memories, is still there: memories existed, and an empty one would hide their loss.
    _three(env)
    shutil.rmtree(_store(env) / "_octobrain")
    shutil.rmtree(_store(env) / "memories.lance")
    done = octobrain(env, "stats")
    assert done.returncode == 1 and "total: 0" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert "'memories'" in line and "relationships, made after it, is here" in line, line
    assert not (_store(env) / "memories.lance").exists()
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "memories: missing" in out, out


def test_a_lost_companion_is_an_error_even_with_the_manifest_lost_too(
    env: dict[str, str],
) -> None:
    # `_octobrain/` and the edge table deleted: the store was taken for one made before the
    # manifest, the edges re-created empty, and `doctor` said ok. Memories that were written
    # show the edge table existed (it is made before any write to them).
    ids = sorted(_three(env))
    octobrain(env, "relate", ids[0], ids[1])
    shutil.rmtree(_store(env) / "_octobrain")
    shutil.rmtree(_store(env) / "relationships.lance")
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "relationships: missing" in out, out
    done = octobrain(env, "graph", ids[0])
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "'relationships'" in line and "not re-created empty" in line, line
    # (what shows it: memories holds writes made after it, and the journal was made after it)
    assert "memories holds writes" in line or "consolidations, made after it" in line, line
    assert not (_store(env) / "relationships.lance").exists()


def test_a_lost_newest_version_is_an_error_not_a_silent_rollback(env: dict[str, str]) -> None:
    # Its manifest file gone (a partial backup or sync, a crash before it reached the disk):
    # opening at the version before would hide an acknowledged memory, and the next write
    # would take its version number and bury it.
    facts = _three(env)
    versions = _store(env) / "memories.lance" / "_versions"
    newest = sorted(versions.glob("*.manifest"))[0]  # names count down from 2**64
    newest.unlink()
    for args in (("recent",), ("memorize", "-t", "After the loss", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories'" in line and "version 4 committed" in line, line
        assert "latest_version_hint.json" in line, line
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "memories: version 4 committed" in out, out
    # The way out the message names: accept the table as it was at version 3.
    (versions / "latest_version_hint.json").unlink()
    (_store(env) / "_octobrain" / "versions.json").unlink()
    done = octobrain(env, "recent", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len({m["id"] for m in json.loads(done.stdout)} & facts) == 2


def _indexed(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """12 memories with their three scalar indexes built; their ids."""
    from octobrain.models import Memory
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 10)  # indexes from 10 rows here
    config = Config(embedding=EmbeddingConfig(model="hash:64"))
    brain = Brain("github.com/acme/api", config=config, uri=_store(env))
    facts = [
        Memory(
            title=f"Fact {i}", content=f"Durable fact {i} on port {8000 + i}.", scope=brain.scope
        )
        for i in range(12)
    ]
    brain.store.add(facts, brain.embedder.embed_documents([m.searchable_text() for m in facts]))
    brain.store.compact()
    indexed = {ix.columns[0] for ix in brain.store.memories.list_indices()}
    assert indexed == {"id", "title", "scope", "state"}
    return [m.id for m in facts]


def _cut_id_index(env: dict[str, str]) -> None:
    """The id index's pages cut to half: its lookup table still reads."""
    table = lancedb.connect(_store(env)).open_table("memories")
    [uuid] = [ix.index_uuid for ix in table.list_indices() if ix.name == "id_idx"]
    pages = _store(env) / "memories.lance" / "_indices" / uuid / "page_data.lance"
    pages.write_bytes(pages.read_bytes()[: pages.stat().st_size // 2])


def test_a_lost_middle_version_is_named_by_doctor(env: dict[str, str]) -> None:
    # The cleanup removes the oldest versions only: one gone between two kept, made this
    # week, was deleted by something else, and `memory restore` cannot go back to it.
    _three(env)
    versions = _store(env) / "memories.lance" / "_versions"
    kept = sorted(versions.glob("*.manifest"), key=lambda f: (1 << 64) - 1 - int(f.stem))
    middle = kept[len(kept) // 2]
    number = (1 << 64) - 1 - int(middle.stem)
    middle.unlink()
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"], out
    [problem] = report["problems"]
    assert problem["table"] == "memories" and not problem["damage"], problem
    assert problem["problem"].startswith(f"version {number} of its history is gone"), problem
    done = octobrain(env, "stats")  # reads use the newest version: not refused
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr


def _flip_bitmap_lookups(env: dict[str, str]) -> None:
    """64 bytes in the middle of each bitmap index's page lookup inverted (on a larger store
    LanceDB panics reading them: `test_a_lance_panic_is_one_line_naming_doctor`)."""
    for lookup in (_store(env) / "memories.lance" / "_indices").glob("*/bitmap_page_lookup.lance"):
        data = bytearray(lookup.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
        lookup.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["indexes lost", "id index pages cut", "bitmaps flipped"])
def test_a_lost_index_is_found_by_doctor_and_rebuilt_by_reindex(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # Reads through the index (a lookup by id, the scope filter) fail while a full scan of
    # every row reads fine: the error sends the user to doctor, which must find it. Cut
    # pages of the id index went unnoticed: doctor looked up one value, which reads one page.
    ids = _indexed(env, monkeypatch)
    if damage == "indexes lost":
        shutil.rmtree(_store(env) / "memories.lance" / "_indices")
    elif damage == "bitmaps flipped":
        _flip_bitmap_lookups(env)
    else:
        _cut_id_index(env)
    done = octobrain(env, *(("recent",) if damage == "bitmaps flipped" else ("get", ids[0])))
    assert done.returncode == 1 and "octobrain doctor" in one_clear_line(done.stderr)
    if damage == "indexes lost":  # a memorize looks for a copy of itself through them too
        done = octobrain(env, "memorize", "-t", "After the loss", "-c", "A fact written now.")
        assert done.returncode == 1 and "Memory stored" not in done.stdout
        line = one_clear_line(done.stderr)
        assert "nothing was changed" in line and "octobrain doctor" in line, line
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    counts = {"indexes lost": 4, "id index pages cut": 1, "bitmaps flipped": 2}  # (scope, state)
    assert rc == 1 and len(report["problems"]) == counts[damage], report
    for problem in report["problems"]:
        assert problem["problem"].startswith("index ") and "cannot be read" in problem["problem"]
        assert "`octobrain memory reindex`" in problem["repair"]
    done = octobrain(env, "reindex", scoped=False)
    assert done.returncode == 0 and "dropped 4 indexes" in done.stdout, done.stderr
    assert run_cli(env, "doctor")[0] == 0
    assert octobrain(env, "get", ids[0]).returncode == 0
    memorize(env, "After the repair", "A fact written once the indexes were rebuilt.")


def test_a_lance_panic_or_an_overflowing_footer_is_one_line_naming_doctor() -> None:
    # A bitmap index's lookup flipped on a store of 5,000 memories made LanceDB panic
    # (`pyo3_async_runtimes.RustPanic`, no module exports the class), and a data file's
    # footer flipped gave a ValueError: every command, and doctor, ended in a traceback.
    from octobrain.store.manifest import read_failure

    class RustPanic(Exception):  # (matched by its name, as the real one must be)
        pass

    for failure, said in (
        (RustPanic("rust future panicked: unknown error"), "LanceDB panicked reading it"),
        (ValueError("Invalid input, column metadata range overflows for column index 11"), "range"),
    ):
        line = read_failure(failure)
        assert line is not None and line.startswith("store: a table cannot be read (")
        assert said in line and "octobrain doctor" in line
    assert read_failure(ValueError("Invalid input, something else")) is None


def test_a_cut_data_file_is_not_blamed_on_an_index(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index reads fail over such a file too; doctor sent the user to `memory reindex`,
    # which cannot read the rows either (an index read scans the rows it does not cover).
    _indexed(env, monkeypatch)
    memorize(env, "After the index", "A fact written after the indexes were built.")
    for data in (_store(env) / "memories.lance" / "data").glob("*.lance"):
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    problems = json.loads(out)["problems"]
    assert rc == 1 and [p["table"] for p in problems] == ["memories"], problems
    assert problems[0]["problem"].startswith("cannot be read"), problems
    assert "reindex" not in problems[0]["repair"], problems
    # Run anyway, reindex dropped the indexes, failed to build them, and said "cannot write
    # … nothing was changed (check free space and permissions)".
    done = octobrain(env, "reindex", scoped=False)
    assert done.returncode == 1 and "octobrain doctor" in one_clear_line(done.stderr)
    assert "cannot be read" in done.stderr and "free space" not in done.stderr
    table = lancedb.connect(_store(env)).open_table("memories")
    assert len(table.list_indices()) == 4, "the indexes were dropped"


def test_a_corrupt_table_manifest_is_damage_not_a_full_disk(env: dict[str, str]) -> None:
    _three(env)
    versions = sorted((_store(env) / "memories.lance" / "_versions").glob("*.manifest"))
    versions[0].write_bytes(b"garbage")  # v2 naming: the lowest file name is the newest version
    done = octobrain(env, "stats")
    assert done.returncode == 1
    line = one_clear_line(done.stderr)
    assert "'memories'" in line and "damaged" in line and "free space" not in line, line


# ---- a read-only store: reads take no write lock ---------------------------------------------


def test_a_read_only_store_exports_completely_and_searches_knowledge(
    env: dict[str, str], frozen: Callable[[], None], tmp_path: Path
) -> None:
    config = Config(embedding=EmbeddingConfig(model="hash:64"))
    brain = Brain("github.com/acme/api", config=config, uri=_store(env))
    twins(brain)
    assert brain.sleep_consolidate().consolidations  # a journal record to export
    brain.flush()
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    frozen()
    out = tmp_path / "backup.jsonl"
    done = octobrain(env, "export", str(out))
    assert done.returncode == 0, done.stderr
    kinds = Counter(json.loads(line)["kind"] for line in out.read_text().splitlines())
    assert kinds["memory"] == 5 and kinds["consolidation"] == 1, kinds
    found = octobrain(env, "search", "which port does the API listen on", group="knowledge")
    assert found.returncode == 0 and "8443" in found.stdout, found.stderr
    new = tmp_path / "new.md"
    new.write_text("# New\n\nA document the frozen store cannot take.\n")
    refused = octobrain(env, "index", str(new), group="knowledge")
    assert refused.returncode == 1
    assert one_clear_line(refused.stderr).startswith("error: store: cannot write to ")


def test_an_old_store_without_the_context_column_opens_read_only(
    env: dict[str, str], frozen: Callable[[], None]
) -> None:
    """A store made before the `context` column: a reader without write access reads it (the
    column reads as empty); the first write, once allowed, adds the column."""
    mid = memorize(env, "Primary database", "Postgres 16 is the primary database.")
    lancedb.connect(_store(env)).open_table("memories").drop_columns(["context"])
    frozen()
    found = octobrain(env, "remember", "which database is primary", "--format", "json")
    assert found.returncode == 0, found.stderr
    assert [h["id"] for h in json.loads(found.stdout)["results"]] == [mid]
    assert octobrain(env, "recent", "--format", "json").returncode == 0
    refused = octobrain(env, "memorize", "-t", "Another fact", "-c", "This cannot be written.")
    assert refused.returncode == 1
    assert one_clear_line(refused.stderr).startswith("error: store: cannot write to ")
    assert "context" not in lancedb.connect(_store(env)).open_table("memories").schema.names
    subprocess.run(["chattr", "-R", "-i", env["OCTOBRAIN_DATA_DIR"]], check=True)
    memorize(env, "Cache", "Redis 7 caches sessions.")
    assert "context" in lancedb.connect(_store(env)).open_table("memories").schema.names
    assert len(json.loads(octobrain(env, "recent", "--format", "json").stdout)) == 2


def test_a_lost_knowledge_table_is_an_error_too(env: dict[str, str], tmp_path: Path) -> None:
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    shutil.rmtree(_store(env) / "knowledge_chunks.lance")
    done = octobrain(env, "search", "which port", group="knowledge")
    assert done.returncode == 1
    line = one_clear_line(done.stderr)
    assert "'knowledge_chunks'" in line and "index the sources again" in line, line
    assert not (_store(env) / "knowledge_chunks.lance").exists()


def test_doctor_recreate_of_the_knowledge_tables_keeps_the_store_s_mark(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `doctor --recreate knowledge` deleted the store's mark (`store.seen`) while its memories
    # were still there: the next open left a new one dated that day, and the store's first use
    # was lost from the store-gone error ("used one there (since <date>)").
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    marks = Path(env["OCTOBRAIN_DATA_DIR"]) / "stores"
    _three(env)
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    [mark] = marks.glob("*.json")
    held = mark.read_text()
    shutil.rmtree(_store(env) / "knowledge_chunks.lance")
    rc, out, err = run_cli(env, "doctor", "--recreate", "knowledge")
    assert rc == 0 and "knowledge: started over, empty" in err and "ok: nothing" in out, out
    assert [mark] == list(marks.glob("*.json")) and mark.read_text() == held
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    assert mark.read_text() == held

    # A store of knowledge alone, started over: nothing is left of it, and it is made again.
    alone = server_env(tmp_path / "alone")
    assert octobrain(alone, "index", str(doc), group="knowledge").returncode == 0
    shutil.rmtree(_store(alone) / "knowledge_chunks.lance")
    assert run_cli(alone, "doctor", "--recreate", "knowledge")[0] == 0
    assert list((tmp_path / "alone" / "stores").glob("*.json")) == []
    assert octobrain(alone, "index", str(doc), group="knowledge").returncode == 0


@pytest.mark.parametrize("table", ["knowledge_chunks", "knowledge_sources"])
def test_a_knowledge_write_over_a_cut_data_file_names_the_damage_not_free_space(
    env: dict[str, str], tmp_path: Path, table: str
) -> None:
    # Refused, but as "cannot write …: failed to fill whole buffer; nothing was changed (check
    # free space and permissions)": the user looked for free space, not at `doctor`.
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    for data in (_store(env) / f"{table}.lance" / "data").glob("*.lance"):
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    new = tmp_path / "queues.md"
    new.write_text("# Queues\n\nKafka carries the events between the services.\n")
    for args in (("index", str(new)), ("store", "layout", "The events topic has 12 partitions.")):
        done = octobrain(env, *args, group="knowledge")
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "cannot be read" in line and "octobrain doctor" in line, line
        assert "free space" not in line, line
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and table in out, out


def test_on_object_storage_the_manifest_lives_in_the_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        s3 = S3(f"http://127.0.0.1:{server.get_host_and_port()[1]}")
        for key, value in CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        bucket = s3.bucket()
        uri = f"s3://{bucket}/octobrain"
        config = Config(
            embedding=EmbeddingConfig(model="hash:64"),
            storage=StorageConfig(options=tuple(f"{k}={v}" for k, v in s3.options.items())),
        )
        brain = Brain("github.com/acme/api", config=config, uri=uri)
        brain.memorize("Deploys", "Production deploys go out on Tuesdays after review.")
        location = StoreLocation.from_config(config, uri)
        assert {"memories", "relationships"} <= set(location.read_json(MANIFEST)["tables"])
        assert diagnose(location).ok
        objects = s3.client("s3")
        listed = objects.list_objects_v2(Bucket=bucket, Prefix="octobrain/memories.lance/")  # type: ignore[attr-defined]
        for item in listed["Contents"]:
            objects.delete_object(Bucket=bucket, Key=item["Key"])  # type: ignore[attr-defined]
        with pytest.raises(TableDamaged, match="'memories'"):
            Brain("github.com/acme/api", config=config, uri=uri).stats()
        report = diagnose(location)
        assert not report.ok and report.problems[0].table == "memories"
    finally:
        server.stop()


def test_a_corrupt_store_manifest_is_one_line_with_the_way_out(env: dict[str, str]) -> None:
    # The way out, in the error and in `doctor`, was to delete the file by hand.
    _three(env)
    record = _store(env) / "_octobrain" / "manifest.json"
    tables = sorted(json.loads(record.read_text())["tables"])
    record.write_text("{not json")
    done = octobrain(env, "stats")
    assert done.returncode == 1
    line = one_clear_line(done.stderr)
    assert "_octobrain/manifest.json cannot be read" in line, line
    assert "`octobrain doctor --rewrite-manifest` writes it again" in line, line
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "repair: `octobrain doctor --rewrite-manifest`" in out, out
    assert "delete it" not in out, out
    rc, out, err = run_cli(env, "doctor", "--rewrite-manifest")
    assert rc == 0 and "ok: nothing is wrong" in out, (out, err)
    assert "manifest: written again, listing memories, relationships" in err, err
    assert sorted(json.loads(record.read_text())["tables"]) == tables
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr
