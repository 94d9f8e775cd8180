"""Tables of a store on S3 started over (`doctor --recreate`, an older release): they open, are
recorded again, and processes open across the recreate write on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.embed.factory import get_embedder
from octobrain.store import lease as lease_module
from octobrain.store.lease import LEASE_TTL_S
from octobrain.store.location import StoreLocation
from tests.object_store_support import (
    S3,
    SCOPE,
    cli_env,
    delete_newest_version,
    s3_brain,
)
from tests.object_store_support import machine as machine  # the fixture, shared
from tests.object_store_support import s3 as s3  # the fixture, shared


def _index_notes(knowledge: Any, folder: Path) -> None:
    """Index four notes, `note0.md`–`note3.md`, one commit each: the chunks table reaches a
    version well above that of a table made again."""
    for n in range(4):
        doc = folder / f"note{n}.md"
        doc.write_text(f"# Note {n}\n\nPromote the replica in region {n} first.\n")
        knowledge.index(str(doc))


def _age_record(location: StoreLocation, seconds: float) -> None:
    """Make every entry of the version record say it was set `seconds` earlier than it says."""
    import obstore

    from octobrain.store.highwater import MARKS, RECORDED_AT

    key = f"_octobrain/{MARKS}"
    record = json.loads(bytes(obstore.get(location.objects(), key).bytes()))
    record[RECORDED_AT] = {name: at - seconds for name, at in record[RECORDED_AT].items()}
    obstore.put(location.objects(), key, json.dumps(record).encode())


def _an_hour_ago(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries of the version record set from now on say they were set an hour ago (as if the
    writes came an hour before what the test does next)."""
    from octobrain.store import highwater, sighted

    monkeypatch.setattr(highwater, "_clock", lambda: time.time() - 3600)
    monkeypatch.setattr(sighted, "_clock", lambda: time.time() - 3600)  # (and seen then)


def test_tables_started_over_by_a_release_that_keeps_no_record_open_and_are_recorded_again(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A teammate on an older release ran `doctor --recreate knowledge`: the tables were made
    # again from version 1, and the record still said the old, higher versions. Every newer
    # machine refused the healthy tables as having lost versions until someone deleted it.
    from octobrain.knowledge import Knowledge
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    brain = s3_brain(machine, uri)
    location = StoreLocation(uri, machine.options)
    laptop = Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri)
    with monkeypatch.context() as earlier:  # indexed an hour before the recreate
        _an_hour_ago(earlier)
        _index_notes(laptop, tmp_path)
    stale = location.high_water.recorded("knowledge_chunks") or 0

    db = location.connect()  # the older release: dropped and made again, no record touched
    for name in ("knowledge_sources", "knowledge_chunks"):
        schema = db.open_table(name).schema
        db.drop_table(name)
        db.create_table(name, schema=schema)
    brain.memorize("Later", "Written after the recreate: the record is rewritten whole.")
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == stale

    desktop = Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri)
    assert desktop.search("replica").hits == []  # opens, started over and empty
    runner, env = CliRunner(), cli_env(machine, uri)
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    desktop.index(str(tmp_path / "note0.md"))  # the next write records the right version
    newest = int(location.connect().open_table("knowledge_chunks").version)
    assert newest < stale
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == newest
    assert [h.title for h in desktop.search("replica").hits] == ["Note 0"]

    # A version lost from the table made again is still a loss: refused, `doctor` exit 1.
    delete_newest_version(location, "knowledge_chunks")
    with pytest.raises(TableDamaged, match=r"table 'knowledge_chunks' .* is damaged"):
        Knowledge(SCOPE, config=brain.config, embedder=get_embedder("hash:64"), uri=uri).search(
            "replica"
        )
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 1


def test_a_recreate_whose_record_updates_failed_leaves_a_store_that_opens(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `doctor --recreate` clears the tables' entries best-effort: when that write and the next
    # (the tables made again) both failed on the network, the healthy store was refused as
    # having lost versions until someone deleted the record.
    from octobrain.knowledge import Knowledge
    from octobrain.store.highwater import HighWater
    from octobrain.store.manifest import TableDamaged

    uri = f"s3://{machine.bucket()}/octobrain"
    config = s3_brain(machine, uri).config
    laptop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    _index_notes(laptop, tmp_path)
    location = StoreLocation(uri, machine.options)
    stale = location.high_water.recorded("knowledge_chunks")
    delete_newest_version(location, "knowledge_chunks")

    def unreachable(self: HighWater, versions: Any) -> None:
        raise OSError("connection reset by peer")

    runner, env = CliRunner(), cli_env(machine, uri)
    with monkeypatch.context() as offline:
        offline.setattr(HighWater, "_record", unreachable)
        fixed = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
        assert fixed.exit_code == 0, fixed.output
        made = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
        assert made.search("replica").hits == []  # made again; its record failed too
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == stale
    # Within the clock tolerance of the stale entry the tables are still refused (a loss and a
    # table started over cannot be told apart there); past it, they open.
    with pytest.raises(TableDamaged):
        Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri).search("rota")
    _age_record(location, 3600)

    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    desktop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    assert desktop.search("replica").hits == []  # opens
    desktop.index(str(tmp_path / "note1.md"))
    newest = int(location.connect().open_table("knowledge_chunks").version)
    assert StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks") == newest


def test_a_table_started_over_that_reaches_its_stale_entrys_number_still_shows_a_loss(
    machine: S3,
) -> None:
    # The stale entry says 3; the table made again reaches 3 and that commit is recorded.
    # Were the entry's old time kept, a loss of that version would pass for staleness.
    import pyarrow as pa

    from octobrain.store.versions import lost_version

    location = StoreLocation(f"s3://{machine.bucket()}/octobrain", machine.options)
    db, schema = location.connect(), pa.schema([("id", pa.string())])

    def three_versions() -> None:
        table = db.create_table("notes", schema=schema)
        table.add([{"id": "a"}])
        table.add([{"id": "b"}])
        with location.lock("write", 10):
            location.high_water.record({"notes": int(table.version)})

    three_versions()
    db.drop_table("notes")  # started over by a release that keeps no record, then written on
    three_versions()
    delete_newest_version(location, "notes")
    lost = lost_version(
        StoreLocation(location.uri, machine.options), "notes", db.open_table("notes")
    )
    assert lost is not None and "version 3 committed" in lost.reason


def test_a_holder_whose_lease_was_taken_over_records_no_version_above_the_table(
    machine: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The laptop committed, then paused past its lease before recording the version; the
    # desktop took the lease over and started the knowledge tables over (`doctor --recreate`,
    # versions from 1). Resumed, the laptop's record must not put its old, higher version
    # over the new tables': a healthy store would be refused as having lost versions.
    import obstore

    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    config = s3_brain(machine, uri).config
    laptop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    _index_notes(laptop, tmp_path)
    location = laptop.kstore.location
    high_water = location.high_water
    real_record, real_elapsed = high_water.record, lease_module._elapsed
    runner = CliRunner()

    def paused_then_resumed(versions: Any) -> None:
        high_water.record = real_record  # type: ignore[method-assign]
        # Paused past the lease's time: the desktop finds it long dead and takes it over.
        monkeypatch.setattr(lease_module, "_elapsed", lambda: real_elapsed() + LEASE_TTL_S + 1)
        dead = {"holder": "laptop:1:paused", "expires": time.time() - 3600}
        obstore.put(
            location.objects(), "_octobrain/locks/knowledge.json", json.dumps(dead).encode()
        )
        # The damage the desktop repairs: versions the laptop recorded before are gone.
        recorded = StoreLocation(uri, machine.options).high_water.recorded("knowledge_chunks")
        while int(location.connect().open_table("knowledge_chunks").version) >= (recorded or 0):
            delete_newest_version(location, "knowledge_chunks")
        env = cli_env(machine, uri)
        done = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
        assert done.exit_code == 0, done.output
        desktop = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
        desktop.index(str(tmp_path / "note0.md"))
        real_record(versions)  # the laptop resumes where it paused

    high_water.record = paused_then_resumed  # type: ignore[method-assign]
    doc = tmp_path / "late.md"
    doc.write_text("# Late\n\nWritten just before the laptop's lid closed.\n")
    laptop.index(str(doc))
    monkeypatch.setattr(lease_module, "_elapsed", real_elapsed)

    doctor = runner.invoke(main, ["doctor"], env=cli_env(machine, uri))
    assert doctor.exit_code == 0, doctor.output
    fresh = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    assert [h.title for h in fresh.search("replica").hits]  # opens, not refused as damaged


def test_a_process_open_across_another_machines_recreate_of_forgotten_turns_writes_on(
    machine: S3,
) -> None:
    # An MCP server open all day held a handle to `forgotten_turns`. Another machine started
    # the damaged table over (`doctor --recreate forgotten_turns`, as `doctor` says to): the
    # server's every write then failed ("cannot write … Not found … check free space and
    # permissions"), memorize too, until it was restarted.
    from octobrain.memory.conversation import parse_text

    uri = f"s3://{machine.bucket()}/octobrain"
    server = s3_brain(machine, uri)
    said = ["Deploys go out on Tuesdays.", "The rate limit is 100 a minute.", "Staging is 5433."]
    chat = "\n".join(json.dumps({"speaker": "user", "text": text}) for text in said)
    assert server.ingest(parse_text(chat, "chat")).added == 3
    turns = {m.content: m.id for m in server.recent()}
    server.forget([turns[said[0]]], confirm=True)
    server.forget([turns[said[1]]], confirm=True)
    delete_newest_version(server.store.location, "forgotten_turns")
    runner, env = CliRunner(), cli_env(machine, uri)
    fixed = runner.invoke(main, ["doctor", "--recreate", "forgotten_turns"], env=env)
    assert fixed.exit_code == 0 and "ok: nothing is wrong" in fixed.output, fixed.output

    written, _ = server.memorize("Written after", "The server writes on after the recreate.")
    assert server.forget([turns[said[2]]], confirm=True).deleted == 1
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
    laptop = s3_brain(machine, uri)
    assert written.id in {m.id for m in laptop.recent()}
    # The turn forgotten after the recreate stays forgotten (the two before went with it).
    again = laptop.ingest(parse_text(chat, "chat"))
    assert (again.forgotten, again.added) == (1, 2)


def test_a_process_open_across_another_machines_recreate_of_knowledge_searches_and_indexes(
    machine: S3, tmp_path: Path
) -> None:
    # An MCP server open all day held handles to the knowledge tables. Another machine started
    # them over (`doctor --recreate knowledge`, as `doctor` says to): the server's every
    # search and index failed ("lance error: … Not found: …knowledge_sources.lance/data/…"),
    # until it was restarted or another process indexed something.
    from octobrain.knowledge import Knowledge

    uri = f"s3://{machine.bucket()}/octobrain"
    config = s3_brain(machine, uri).config
    server = Knowledge(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)
    doc = tmp_path / "runbook.md"
    for region in ("eu-west-1", "eu-west-2"):
        doc.write_text(f"# Runbook\n\nPromote the replica in {region} first.\n")
        server.index(str(doc))
    delete_newest_version(StoreLocation(uri, machine.options), "knowledge_chunks")
    runner, env = CliRunner(), cli_env(machine, uri)
    fixed = runner.invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
    assert fixed.exit_code == 0 and "ok: nothing is wrong" in fixed.output, fixed.output

    assert server.search("replica").hits == []  # started over, empty
    server.index(str(doc))
    assert [h.title for h in server.search("replica").hits] == ["Runbook"]
    assert runner.invoke(main, ["doctor"], env=env).exit_code == 0
