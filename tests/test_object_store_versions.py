"""The version record of a store on S3: a deleted newest version is refused until put back or
accepted, and ordinary team writes never look like a lost version."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import StorageError
from octobrain.memory.brain import Brain
from octobrain.store import seen
from octobrain.store.location import StoreLocation
from tests.object_store_support import (
    MARKS,
    S3,
    SCOPE,
    bucket_keys,
    cli_env,
    delete_newest_version,
    s3_brain,
)
from tests.object_store_support import machine as machine  # the fixture, shared
from tests.object_store_support import s3 as s3  # the fixture, shared


def test_a_deleted_newest_version_in_a_bucket_is_refused_until_put_back_or_accepted(
    machine: S3,
) -> None:
    # Lance leaves no version hint in a bucket: the version before was served (the second
    # memory gone, `doctor` ok) and the next write buried the loss.
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    laptop = s3_brain(machine, uri)
    laptop.memorize("First", "The first acknowledged memory about deploys.")
    second, _ = laptop.memorize("Second", "The second acknowledged memory about rate limits.")
    location = laptop.store.location
    newest = int(laptop.store.memories.version)
    delete_newest_version(location, "memories")

    with pytest.raises(TableDamaged) as refused:
        s3_brain(machine, uri).recent()
    line = str(refused.value)
    assert "\n" not in line
    assert f"table 'memories' in {uri} is damaged" in line
    assert f"version {newest} committed" in line
    assert f"the newest version that opens is {newest - 1}" in line
    assert f"delete the object {uri}/_octobrain/versions.json" in line
    runner = CliRunner()
    doctor = runner.invoke(main, ["doctor"], env=cli_env(machine, uri))
    assert doctor.exit_code == 1
    assert f"memories: version {newest} committed" in doctor.output

    # Accepting the loss is the one step the line names; the store then opens and writes.
    import obstore

    obstore.delete(location.objects(), MARKS)
    desktop = s3_brain(machine, uri)
    assert second.id not in {m.id for m in desktop.recent()}
    desktop.memorize("Third", "A memory written after the loss was accepted.")
    assert runner.invoke(main, ["doctor"], env=cli_env(machine, uri)).exit_code == 0

    # A record that is no record guards nothing (no crash), and the next write makes it whole.
    obstore.put(location.objects(), MARKS, b"\xff not json")
    s3_brain(machine, uri).memorize("Fourth", "Written over a garbled record.")
    assert StoreLocation(uri, machine.options).high_water.recorded("memories") == int(
        s3_brain(machine, uri).store.memories.version
    )


def test_team_writes_restores_reembeds_and_recreates_never_look_like_a_lost_version(
    machine: S3, tmp_path: Path
) -> None:
    import obstore

    from octobrain.knowledge import Knowledge
    from octobrain.memory.transfer import reembed

    uri = f"s3://{machine.bucket()}/octobrain"
    location = StoreLocation(uri, machine.options)
    runner = CliRunner()

    def marks() -> dict[str, int]:
        return dict(json.loads(bytes(obstore.get(location.objects(), MARKS).bytes())))

    def newest(table: str) -> int:
        return int(location.connect().open_table(table).version)

    def doctor(*args: str) -> int:
        return runner.invoke(main, ["doctor", *args], env=cli_env(machine, uri)).exit_code

    laptop, desktop = s3_brain(machine, uri), s3_brain(machine, uri)
    first, _ = laptop.memorize("First", "Deploys go out on Tuesdays.")
    link = [{"target_id": first.id}]
    desktop.memorize("Second", "The rate limit is 100 per minute.", related_to=link)
    laptop.update(first.id, add_files=["deploy.py"])  # (its view lags the desktop's write)
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-2 first.\n")
    Knowledge(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri).index(
        str(doc)
    )
    # Every commit under a lease is recorded, by either lease: the mark is the newest version.
    tables = ("memories", "relationships", "knowledge_sources", "knowledge_chunks")
    assert {t: marks()[t] for t in tables} == {t: newest(t) for t in tables}

    laptop.store.restore(laptop.store.history(2)[1].version)  # a new, higher version
    moved = Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:32"), uri=uri)
    assert reembed(moved) == 2  # an overwrite: a new, higher version too
    assert marks()["memories"] == newest("memories") and doctor() == 0

    # The knowledge tables started over by `doctor --recreate` count from 1 again.
    delete_newest_version(location, "knowledge_chunks")
    assert doctor() == 1
    assert doctor("--recreate", "knowledge") == 0
    knowledge = Knowledge(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri)
    assert knowledge.search("replica").hits == []  # made again, empty, at version 1
    assert doctor() == 0
    knowledge.index(str(doc))
    assert marks()["knowledge_chunks"] == newest("knowledge_chunks") and doctor() == 0

    # The whole prefix deleted: the store gone whole is refused (this machine used it), and
    # made again once its mark is deleted, as the error says; a version mark gone guards nothing.
    for key in bucket_keys(location, ""):
        obstore.delete(location.objects(), key)
    with pytest.raises(StorageError, match="holds no store, yet this machine used one there"):
        Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri).stats()
    seen.forget(uri)
    again = Brain(SCOPE, config=laptop.config, embedder=get_embedder("hash:64"), uri=uri)
    again.memorize("Fresh", "A store made again at the same place.")
    assert marks()["memories"] == newest("memories") and doctor() == 0


def test_s3_ddb_keeps_no_mark_of_its_own(machine: S3) -> None:
    # Its DynamoDB table names the newest version already: a lost manifest fails the open.
    bucket = machine.bucket()
    uri = f"s3+ddb://{bucket}/octobrain?ddbTableName={machine.commit_table()}"
    brain = s3_brain(machine, uri, dynamodb_endpoint=machine.endpoint)
    brain.memorize("First", "Deploys go out on Tuesdays.")
    assert MARKS not in bucket_keys(StoreLocation(f"s3://{bucket}/octobrain", machine.options), "")


def test_the_version_record_costs_one_get_per_open_and_one_put_per_write(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import obstore

    uri = f"s3://{machine.bucket()}/octobrain"
    first, _ = s3_brain(machine, uri).memorize("First", "Deploys go out on Tuesdays.")
    calls: list[tuple[str, str]] = []

    def counted(method: str, real: Any) -> Any:
        def call(store: Any, path: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((method, path))
            return real(store, path, *args, **kwargs)

        return call

    monkeypatch.setattr(obstore, "get", counted("GET", obstore.get))
    monkeypatch.setattr(obstore, "put", counted("PUT", obstore.put))

    def record() -> list[str]:
        return [method for method, path in calls if path == MARKS]

    brain = s3_brain(machine, uri)
    assert [m.id for m in brain.recent()] == [first.id]
    assert record() == ["GET"]  # both tables checked by one read
    brain.memorize("Second", "The rate limit is 100 per minute.")
    brain.update(first.id, add_files=["deploy.py"])
    assert record() == ["GET", "PUT", "PUT"]  # one per write, after its commit

    calls.clear()
    local = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db")
    local.memorize("Local", "A store on this machine's disk.")
    assert local.recent() and calls == []


def test_a_loss_is_named_when_the_recording_machines_clock_runs_minutes_slow(
    machine: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lost commit was recorded by a machine whose clock runs 4 minutes slow: its entry
    # looks older than the surviving commit. Within the clock tolerance that is no sign of a
    # table started over: the loss is still named.
    import pyarrow as pa

    from octobrain.store import highwater
    from octobrain.store.versions import lost_version

    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    db = location.connect()
    table = db.create_table("notes", schema=pa.schema([("id", pa.string())]))
    table.add([{"id": "a"}])
    table.add([{"id": "b"}])
    monkeypatch.setattr(highwater, "_clock", lambda: time.time() - 240)
    with location.lock("write", 10):
        location.high_water.record({"notes": int(table.version)})
    delete_newest_version(location, "notes")
    lost = lost_version(
        StoreLocation(location.uri, machine.options), "notes", db.open_table("notes")
    )
    assert lost is not None and "version 3 committed" in lost.reason


def test_a_process_open_since_before_a_version_was_deleted_does_not_bury_it(
    machine: S3, tmp_path: Path
) -> None:
    # An MCP server stays open all day. Its next write moved its handles to the newest
    # version that opens, the one before the deleted one, and committed in the lost
    # version's place: the loss was buried, and no open ever noticed it.
    from octobrain.knowledge import Knowledge
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    server = s3_brain(machine, uri)
    server.memorize("First", "The first acknowledged memory about deploys.")
    second, _ = server.memorize("Second", "The second acknowledged memory about rate limits.")
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-2 first.\n")
    knowledge = Knowledge(SCOPE, config=server.config, embedder=get_embedder("hash:64"), uri=uri)
    knowledge.index(str(doc))
    location = server.store.location
    delete_newest_version(location, "memories")
    delete_newest_version(location, "knowledge_sources")

    with pytest.raises(
        TableDamaged, match=r"table 'memories' .* is damaged or missing \(version \d+ committed"
    ):
        server.memorize("Third", "Written by the server after the loss.")
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-1 first.\n")
    with pytest.raises(TableDamaged, match=r"table 'knowledge_sources' .* is damaged"):
        knowledge.index(str(doc))
    # Still there to be noticed by every open (not buried), and the way back still works.
    with pytest.raises(TableDamaged, match="table 'memories'"):
        s3_brain(machine, uri).recent()
    assert CliRunner().invoke(main, ["doctor"], env=cli_env(machine, uri)).exit_code == 1
    # Once the loss is accepted, the same process writes on (its last known record is gone).
    import obstore

    obstore.delete(location.objects(), MARKS)
    third, _ = server.memorize("Third", "Written after the loss was accepted.")
    assert [m.id for m in s3_brain(machine, uri).recent()][:1] == [third.id]
    assert second.id not in {m.id for m in s3_brain(machine, uri).recent()}
