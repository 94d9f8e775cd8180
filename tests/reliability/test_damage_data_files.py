"""A table's data file corrupt, cut short, overwritten or changed on disk: one line naming the
table, never an endless search, a wrong answer or free space blamed."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import numpy as np
import pytest

from tests.reliability.damage_support import (
    indexed_store,
    related_pair,
    run_cli,
    store_dir,
    three_facts,
)
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[10:200] = b"x" * 190
    path.write_bytes(bytes(data))


def test_a_corrupt_data_file_is_one_line_naming_the_table(env: dict[str, str]) -> None:
    three_facts(env)
    files = sorted((store_dir(env) / "memories.lance" / "data").glob("*.lance"))
    _corrupt(files[0])
    for args in (
        ("stats",),
        ("remember", "durable fact"),
        ("export", str(store_dir(env).parent / "x")),
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
    three_facts(env)
    data = sorted((store_dir(env) / "memories.lance" / "data").glob("*.lance"))[0]
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
    versions = len(list((store_dir(env) / "memories.lance" / "_versions").iterdir()))
    done = octobrain(env, "memorize", "-t", "After the damage", "-c", "A new fact here.")
    assert done.returncode == 1 and "Memory stored" not in done.stdout, done.stdout
    line = one_clear_line(done.stderr)
    assert f"data file {data.name} " in line and "nothing was changed" in line, line
    assert "octobrain memory restore" in line, line
    assert len(list((store_dir(env) / "memories.lance" / "_versions").iterdir())) == versions
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
    _, data = related_pair(env)
    data.write_bytes(bytes(data.stat().st_size))
    done = octobrain(env, "export", str(store_dir(env).parent / "x.jsonl"))
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert "relationships: cannot be read" in line and "octobrain doctor" in line, line
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "relationships" in out, out


def test_a_write_that_meets_a_cut_data_file_names_the_damage_not_free_space(
    env: dict[str, str],
) -> None:
    # `forget` deletes the memories, then their edges: that second commit read the cut
    # relationships file, and its failure sent the user to look for free space, the memory
    # gone already. A link was acknowledged into the cut table, where the repair (a restore
    # to before the damage) would drop it. Each commit now checks both tables' files first.
    ids, data = related_pair(env)
    data.write_bytes(data.read_bytes()[:100])
    for args in (("forget", ids[0], "-y"), ("relate", ids[1], ids[2])):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "table 'relationships'" in line and f"data file {data.name} holds 100" in line
        assert "nothing was changed" in line and "check free space" not in line, line
    assert octobrain(env, "get", ids[0]).returncode == 0, "forget deleted the memory"


def test_a_changed_embedding_is_refused_not_ranked_first(env: dict[str, str]) -> None:
    # Lance keeps no checksum of its data pages: four bytes of an embedding changed on disk
    # read back without an error. Scored as stored, that memory was every query's first hit
    # (relevance 1e28), and `doctor` said ok.
    ids = sorted(three_facts(env))
    table = lancedb.connect(str(store_dir(env))).open_table("memories")
    rows = table.search().where(f"id = '{ids[0]}'").limit(1).to_arrow()
    vector = np.asarray(rows.column("embedding")[0].as_py(), dtype="<f4").tobytes()
    [data] = [
        f
        for f in (store_dir(env) / "memories.lance" / "data").glob("*.lance")
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


def test_a_cut_data_file_is_not_blamed_on_an_index(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index reads fail over such a file too; doctor sent the user to `memory reindex`,
    # which cannot read the rows either (an index read scans the rows it does not cover).
    indexed_store(env, monkeypatch)
    memorize(env, "After the index", "A fact written after the indexes were built.")
    for data in (store_dir(env) / "memories.lance" / "data").glob("*.lance"):
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
    table = lancedb.connect(store_dir(env)).open_table("memories")
    assert len(table.list_indices()) == 4, "the indexes were dropped"


@pytest.mark.parametrize("table", ["knowledge_chunks", "knowledge_sources"])
def test_a_knowledge_write_over_a_cut_data_file_names_the_damage_not_free_space(
    env: dict[str, str], tmp_path: Path, table: str
) -> None:
    # Refused, but as "cannot write …: failed to fill whole buffer; nothing was changed (check
    # free space and permissions)": the user looked for free space, not at `doctor`.
    doc = tmp_path / "ports.md"
    doc.write_text("# Ports\n\nThe API listens on port 8443.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    for data in (store_dir(env) / f"{table}.lance" / "data").glob("*.lance"):
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
