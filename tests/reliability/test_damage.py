"""A damaged store is loud: a lost table, version or manifest is one error line naming it and
the way back, never an empty store; `octobrain doctor` finds the damage and exits 1; a
read-only store still reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lancedb
import pytest

from octobrain.config import Config, EmbeddingConfig, StorageConfig
from octobrain.memory.brain import Brain
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.manifest import MANIFEST, TableDamaged
from tests.consolidation_support import twins
from tests.object_store_support import CREDENTIALS, S3
from tests.reliability.damage_support import (
    run_cli,
    store_dir,
    three_facts,
)
from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line
from tests.server_support import server_env


@pytest.mark.parametrize("damage", ["versions", "directory"])
def test_a_lost_table_is_an_error_and_is_never_recreated(env: dict[str, str], damage: str) -> None:
    three_facts(env)
    table = store_dir(env) / "memories.lance"
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
    three_facts(env)
    shutil.rmtree(store_dir(env) / "consolidations.lance")
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
    three_facts(env)
    hashed = Config(embedding=EmbeddingConfig(model="hash:64"))
    Brain("github.com/acme/api", config=hashed, uri=store_dir(env)).store.compact()
    data = store_dir(env) / "memories.lance" / "data"
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
    ids = sorted(three_facts(env))
    hashed = Config(embedding=EmbeddingConfig(model="hash:64"))
    Brain("github.com/acme/api", config=hashed, uri=store_dir(env)).store.compact()  # one file
    assert octobrain(env, "forget", "--yes", ids[0]).returncode == 0  # a deletion file in it
    memorize(env, "After the forget", "A fact written after the forget.")
    [deletion] = (store_dir(env) / "memories.lance" / "_deletions").iterdir()
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


def test_a_manifest_that_lost_table_names_gets_them_back_and_guards_them_again(
    env: dict[str, str],
) -> None:
    # Before: the names stayed lost ("the next write records it" never did), and with the
    # memories and edge directories deleted too, the store opened as a new, empty one
    # ("total: 0"; memorize made a new table; doctor ok).
    three_facts(env)
    octobrain(env, "consolidate")  # (the journal table, made after the memories)
    record = store_dir(env) / "_octobrain" / MANIFEST
    record.write_text(json.dumps({"tables": ["consolidations"]}), encoding="utf-8")
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 3" in done.stdout, done.stderr
    assert {"memories", "relationships"} <= set(json.loads(record.read_text())["tables"])
    assert run_cli(env, "doctor")[0] == 0
    record.write_text(json.dumps({"tables": ["consolidations"]}), encoding="utf-8")
    for name in ("memories", "relationships"):
        shutil.rmtree(store_dir(env) / f"{name}.lance")
    for args in (("stats",), ("memorize", "-t", "After the loss", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1 and "total: 0" not in done.stdout, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories'" in line and "consolidations, made after it, is here" in line, line
    assert not (store_dir(env) / "memories.lance").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_an_answer_that_cannot_be_written_is_one_line_not_a_traceback(env: dict[str, str]) -> None:
    # Before: `octobrain memory recent > /dev/full` ended in a 40-line OSError traceback.
    three_facts(env)
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
    three_facts(env)
    rc, out, err = run_cli(env, "doctor", "--format", "json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["ok"] and report["manifest"] == "ok" and report["problems"] == []
    tables = {t["name"]: t for t in report["tables"]}
    assert tables["memories"]["rows_read"] == tables["memories"]["rows_counted"] == 3
    assert {"memories", "relationships"} <= set(tables)


def test_a_zeroed_newest_version_manifest_is_named_not_an_empty_table(
    env: dict[str, str],
) -> None:
    # Lance reads a manifest of zeros as version 0, with no columns: doctor failed with a
    # KeyError traceback, and once the hint was deleted (the repair it named) every command
    # said the store was embedded with '' (dim 0) and to run `memory reembed`.
    three_facts(env)
    versions = store_dir(env) / "memories.lance" / "_versions"
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
    (store_dir(env) / "_octobrain" / "versions.json").unlink()
    done = octobrain(env, "stats")
    assert done.returncode == 0 and "total: 2" in done.stdout, (done.stdout, done.stderr)


def test_a_lost_table_is_an_error_even_with_the_manifest_lost_too(env: dict[str, str]) -> None:
    # Nothing records the table any more, but relationships, which is only ever made after
    # memories, is still there: memories existed, and an empty one would hide their loss.
    three_facts(env)
    shutil.rmtree(store_dir(env) / "_octobrain")
    shutil.rmtree(store_dir(env) / "memories.lance")
    done = octobrain(env, "stats")
    assert done.returncode == 1 and "total: 0" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert "'memories'" in line and "relationships, made after it, is here" in line, line
    assert not (store_dir(env) / "memories.lance").exists()
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "memories: missing" in out, out


def test_a_lost_companion_is_an_error_even_with_the_manifest_lost_too(
    env: dict[str, str],
) -> None:
    # `_octobrain/` and the edge table deleted: the store was taken for one made before the
    # manifest, the edges re-created empty, and `doctor` said ok. Memories that were written
    # show the edge table existed (it is made before any write to them).
    ids = sorted(three_facts(env))
    octobrain(env, "relate", ids[0], ids[1])
    shutil.rmtree(store_dir(env) / "_octobrain")
    shutil.rmtree(store_dir(env) / "relationships.lance")
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "relationships: missing" in out, out
    done = octobrain(env, "graph", ids[0])
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "'relationships'" in line and "not re-created empty" in line, line
    # (what shows it: memories holds writes made after it, and the journal was made after it)
    assert "memories holds writes" in line or "consolidations, made after it" in line, line
    assert not (store_dir(env) / "relationships.lance").exists()


def test_a_lost_newest_version_is_an_error_not_a_silent_rollback(env: dict[str, str]) -> None:
    # Its manifest file gone (a partial backup or sync, a crash before it reached the disk):
    # opening at the version before would hide an acknowledged memory, and the next write
    # would take its version number and bury it.
    facts = three_facts(env)
    versions = store_dir(env) / "memories.lance" / "_versions"
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
    (store_dir(env) / "_octobrain" / "versions.json").unlink()
    done = octobrain(env, "recent", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len({m["id"] for m in json.loads(done.stdout)} & facts) == 2


def test_a_lost_middle_version_is_named_by_doctor(env: dict[str, str]) -> None:
    # The cleanup removes the oldest versions only: one gone between two kept, made this
    # week, was deleted by something else, and `memory restore` cannot go back to it.
    three_facts(env)
    versions = store_dir(env) / "memories.lance" / "_versions"
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


def test_a_corrupt_table_manifest_is_damage_not_a_full_disk(env: dict[str, str]) -> None:
    three_facts(env)
    versions = sorted((store_dir(env) / "memories.lance" / "_versions").glob("*.manifest"))
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
    brain = Brain("github.com/acme/api", config=config, uri=store_dir(env))
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
    lancedb.connect(store_dir(env)).open_table("memories").drop_columns(["context"])
    frozen()
    found = octobrain(env, "remember", "which database is primary", "--format", "json")
    assert found.returncode == 0, found.stderr
    assert [h["id"] for h in json.loads(found.stdout)["results"]] == [mid]
    assert octobrain(env, "recent", "--format", "json").returncode == 0
    refused = octobrain(env, "memorize", "-t", "Another fact", "-c", "This cannot be written.")
    assert refused.returncode == 1
    assert one_clear_line(refused.stderr).startswith("error: store: cannot write to ")
    assert "context" not in lancedb.connect(store_dir(env)).open_table("memories").schema.names
    subprocess.run(["chattr", "-R", "-i", env["OCTOBRAIN_DATA_DIR"]], check=True)
    memorize(env, "Cache", "Redis 7 caches sessions.")
    assert "context" in lancedb.connect(store_dir(env)).open_table("memories").schema.names
    assert len(json.loads(octobrain(env, "recent", "--format", "json").stdout)) == 2


def test_a_lost_knowledge_table_is_an_error_too(env: dict[str, str], tmp_path: Path) -> None:
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    shutil.rmtree(store_dir(env) / "knowledge_chunks.lance")
    done = octobrain(env, "search", "which port", group="knowledge")
    assert done.returncode == 1
    line = one_clear_line(done.stderr)
    assert "'knowledge_chunks'" in line and "index the sources again" in line, line
    assert not (store_dir(env) / "knowledge_chunks.lance").exists()


def test_doctor_recreate_of_the_knowledge_tables_keeps_the_store_s_mark(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `doctor --recreate knowledge` deleted the store's mark (`store.seen`) while its memories
    # were still there: the next open left a new one dated that day, and the store's first use
    # was lost from the store-gone error ("used one there (since <date>)").
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    marks = Path(env["OCTOBRAIN_DATA_DIR"]) / "stores"
    three_facts(env)
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    [mark] = marks.glob("*.json")
    held = mark.read_text()
    shutil.rmtree(store_dir(env) / "knowledge_chunks.lance")
    rc, out, err = run_cli(env, "doctor", "--recreate", "knowledge")
    assert rc == 0 and "knowledge: started over, empty" in err and "ok: nothing" in out, out
    assert [mark] == list(marks.glob("*.json")) and mark.read_text() == held
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    assert mark.read_text() == held

    # A store of knowledge alone, started over: nothing is left of it, and it is made again.
    alone = server_env(tmp_path / "alone")
    assert octobrain(alone, "index", str(doc), group="knowledge").returncode == 0
    shutil.rmtree(store_dir(alone) / "knowledge_chunks.lance")
    assert run_cli(alone, "doctor", "--recreate", "knowledge")[0] == 0
    assert list((tmp_path / "alone" / "stores").glob("*.json")) == []
    assert octobrain(alone, "index", str(doc), group="knowledge").returncode == 0


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
    three_facts(env)
    record = store_dir(env) / "_octobrain" / "manifest.json"
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
