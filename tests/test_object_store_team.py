"""Machines sharing one store on S3: each sees the others' memories, knowledge and sleep passes,
and concurrent writers lose nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from octobrain.config import StorageConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.sleep_startup import start_background_sleep
from octobrain.store.location import StoreLocation
from tests.object_store_support import S3, SCOPE, s3_brain
from tests.object_store_support import machine as machine  # the fixture, shared
from tests.object_store_support import s3 as s3  # the fixture, shared


def test_history_names_the_upkeep_versions_of_a_store_on_s3(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What made a version is read from the transaction Lance records, in the bucket too.
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 1)
    laptop = s3_brain(machine, f"s3://{machine.bucket()}/octobrain")
    for i in (1, 2, 3):
        laptop.memorize(f"Deploy rule {i}", f"Production deploys need review {i}.")
    laptop.store.compact()
    notes = [v.note for v in laptop.store.history(10)]
    assert notes[:6] == [
        "is the store's upkeep: the table's files compacted",
        "is the store's upkeep: a compaction of the table's files begun",
        *["is the store's upkeep: a search index built, updated or dropped"] * 4,
    ]
    assert set(notes[6:]) == {""}


def test_a_second_machine_sees_the_first_ones_memories(machine: S3) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop, desktop = s3_brain(machine, uri), s3_brain(machine, uri)
    note, _ = laptop.memorize("Deploys", "Production deploys go out on Tuesdays after review.")
    assert [h.memory.id for h in laptop.remember("when do deploys go out").hits][:1] == [note.id]
    assert note.id in {h.memory.id for h in desktop.remember("production deploys").hits}

    # Consolidation across machines: near-duplicates written on one, merged on the other.
    text = "The public API rate limit is 100 requests per minute per token"
    dupes = [laptop.memorize(f"Rate limit {i}", f"{text}{'.' * i}")[0] for i in range(1, 4)]
    report = desktop.sleep_consolidate()  # under the write lease: reads the latest commit
    assert len(report.consolidations) == 1
    parent = report.consolidations[0].parent.id
    _catch_up()
    assert laptop.remember("API rate limit").hits[0].memory.id == parent
    assert {m.id for m in dupes} <= {m.id for m in report.consolidations[0].members}

    assert desktop.forget([note.id], confirm=True).deleted == 1
    _catch_up()
    assert note.id not in {h.memory.id for h in laptop.remember("production deploys").hits}
    # Found from the store's change record (one object beside the tables), not every row.
    assert laptop.retriever.corpus.last_catch_up == "changes"


def _catch_up() -> None:
    """Wait out `storage.remote_refresh_ms` (default 1 s): by then every machine reads a write."""
    time.sleep(StorageConfig().remote_refresh_ms / 1000 + 0.1)


_WRITER = textwrap.dedent(
    """
    import json, sys
    from octobrain.memory.brain import Brain
    name, shared, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    brain = Brain("github.com/acme/api")
    for i in range(count):
        memory, _ = brain.memorize(f"Note zq{name}n{i}", f"Finding zq{name}n{i} from {name}.")
        print(json.dumps({"id": memory.id, "marker": f"zq{name}n{i}"}), flush=True)
        brain.update(shared, add_files=[f"{name}-{i}"])
        print(json.dumps({"file": f"{name}-{i}"}), flush=True)
    """
)


@pytest.mark.parametrize("commit_store", ["conditional-put", "dynamodb"])
def test_writers_on_separate_machines_lose_nothing(
    machine: S3, tmp_path: Path, commit_store: str
) -> None:
    bucket = machine.bucket()
    extra: dict[str, str] = {}
    if commit_store == "dynamodb":
        uri = f"s3+ddb://{bucket}/octobrain?ddbTableName={machine.commit_table()}"
        extra["dynamodb_endpoint"] = machine.endpoint
    else:
        uri = f"s3://{bucket}/octobrain"
    shared, _ = s3_brain(machine, uri, **extra).memorize("Shared", "Every machine tags this one.")
    writers, count = 3, 5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, f"m{w}", shared.id, str(count)],
            env={**os.environ, **machine.env(uri, tmp_path / f"machine{w}", **extra)},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    acknowledged: dict[str, str] = {}
    files: set[str] = set()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        for line in out.splitlines():
            record = json.loads(line)
            if "id" in record:
                acknowledged[record["id"]] = record["marker"]
            else:
                files.add(record["file"])
    assert len(acknowledged) == writers * count

    reader = s3_brain(machine, uri, **extra)
    rows = reader.store.scan("true", columns=["id", "title", "related_files"])
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == writers * count + 1  # nothing lost, nothing doubled
    assert set(acknowledged) <= set(ids)
    assert set(reader.get(shared.id).related_files) == files  # every concurrent edit survived
    for mid, marker in acknowledged.items():
        assert mid in {h.memory.id for h in reader.remember(marker, min_relevance=0.0).hits}
    if commit_store == "conditional-put":
        # Each writer recorded the version it committed, in turn: the last is the newest.
        location = StoreLocation(uri, machine.options)
        newest = int(location.connect().open_table("memories").version)
        assert location.high_water.recorded("memories") == newest


def test_an_edit_starts_from_the_latest_commit_even_when_reads_may_lag(machine: S3) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop, desktop = s3_brain(machine, uri), s3_brain(machine, uri)
    shared, _ = laptop.memorize("Shared note", "Both machines tag this one.")
    assert laptop.get(shared.id).related_files == []  # the laptop's view is now fresh...
    desktop.update(shared.id, add_files=["desktop.py"])
    laptop.update(shared.id, add_files=["laptop.py"])  # ...and lags the desktop's edit
    assert set(desktop.get(shared.id).related_files) >= {"desktop.py"}
    _catch_up()
    assert set(laptop.get(shared.id).related_files) == {"desktop.py", "laptop.py"}


def test_accesses_are_counted_off_the_remember_path_and_flushed_at_exit(
    machine: S3, tmp_path: Path
) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    brain = s3_brain(machine, uri)
    note, _ = brain.memorize("Backups", "Nightly backups run at 02:00 UTC to the cold bucket.")
    assert brain.remember("nightly backups").hits[0].memory.id == note.id
    deadline = time.monotonic() + 30
    while brain.store.scan(f"id = '{note.id}'", columns=["access_count"])[0]["access_count"] < 1:
        assert time.monotonic() < deadline, "the queued access was never committed"
        time.sleep(0.2)

    # A CLI call exits right after answering: its queued access is committed on the way out.
    other, _ = brain.memorize("Restores", "Restore drills happen on the first Monday monthly.")
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "remember", "drills"],
        env={**os.environ, **machine.env(uri, tmp_path / "cli")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and other.id in done.stdout, done.stderr
    # (this process's handle reads a bucket up to `remote_refresh_ms` late: a CLI call that
    # took less than that would otherwise be read as not there yet)
    brain.store.refresh()
    rows = brain.store.scan(f"id = '{other.id}'", columns=["access_count"])
    assert rows[0]["access_count"] == 1


def test_knowledge_indexed_on_one_machine_is_searchable_on_another(
    machine: S3, tmp_path: Path
) -> None:
    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\n## Failover\n\nPromote the replica in eu-west-2 first.\n")
    config = s3_brain(machine, uri).config

    def knowledge() -> Knowledge:
        return Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)

    report = knowledge().index(str(doc))
    assert report.embedded >= 1
    hits = knowledge().search("promote the replica").hits
    assert hits and hits[0].uri.endswith("runbook.md") and "eu-west-2" in hits[0].text


def test_a_sleep_pass_is_shared_by_the_whole_team(machine: S3, tmp_path: Path) -> None:
    uri = f"s3://{machine.bucket()}/octobrain"
    laptop = s3_brain(machine, uri)
    laptop.memorize("Seed note", "Something to look at.")
    thread = start_background_sleep(laptop, marker_dir=tmp_path / "laptop")
    assert thread is not None
    thread.join(timeout=120)
    record = laptop.store.location.read_json(next(_sleep_records(laptop)))
    assert record is not None and record["scope"] == SCOPE

    # Another machine (its own local state) finds the pass already done for today.
    from octobrain.memory import sleep_startup

    sleep_startup._started.clear()
    desktop = s3_brain(machine, uri)
    desktop.memorize("Later note", "Written after the pass.")
    thread = start_background_sleep(desktop, marker_dir=tmp_path / "desktop")
    assert thread is not None  # the record lives in the bucket: read in the background
    thread.join(timeout=120)
    assert laptop.store.location.read_json(next(_sleep_records(laptop))) == record
    assert not (tmp_path / "desktop").exists()  # nothing about it kept on this machine


def _sleep_records(brain: Brain) -> Iterator[str]:
    import obstore

    for batch in obstore.list(brain.store.location.objects(), "_octobrain/sleep"):
        for meta in batch:
            yield str(meta["path"]).removeprefix("_octobrain/")
