"""A local store's newest version lost with Lance's hint (`latest_version_hint.json`) is refused,
named by `doctor` with its repair, from octobrain's own version record (`store.highwater`); the
ordinary ways a table's versions move (writers taking turns, restore, reembed, compaction, a
recreate, a backup copied back, a migrate) never look like a loss."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.store.doctor import diagnose
from octobrain.store.highwater import MARKS, RECORDED_AT
from octobrain.store.location import StoreLocation
from octobrain.store.manifest import TableDamaged
from octobrain.store.versions import HINT, newest_on_disk, version_of
from tests.reliability.damage_support import run_cli
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line

SCOPE = "github.com/acme/api"


def _newest_manifest(versions: Path) -> Path:
    return max(versions.glob("*.manifest"), key=lambda f: version_of(f.name))


def test_a_lost_newest_version_with_its_hint_is_refused_until_put_back_or_accepted(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: with the hint gone too, `stats` said 2 (exit 0), `remember` missed the third
    # memory, `doctor` said "ok: nothing is wrong", and the next commit buried the loss.
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    facts = {
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.") for i in range(3)
    }
    versions = store / "memories.lance" / "_versions"
    newest, aside = _newest_manifest(versions), tmp_path / "aside"
    aside.mkdir()
    shutil.move(newest, aside / newest.name)
    shutil.move(versions / HINT, aside / HINT)
    for args in (
        ("stats",),
        ("remember", "durable fact"),
        ("memorize", "-t", "After the loss", "-c", "A new fact here."),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "'memories'" in line and "version 4 committed (recorded in" in line, line
        assert "the newest version that opens is 3" in line and HINT in line, line
        assert str(store / "_octobrain" / MARKS) in line, line
    # (the cold path, which reads the versions without LanceDB, leaves it to the open)
    assert newest_on_disk(StoreLocation(store), "memories") is None
    rc, out = run_cli(env, "doctor")[:2]
    assert rc == 1 and "memories: version 4 committed" in out, out
    assert f"delete {store / '_octobrain' / MARKS}" in out, out

    # Put back: everything is there again.
    shutil.move(aside / newest.name, newest)
    done = octobrain(env, "recent", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert {m["id"] for m in json.loads(done.stdout)} == facts

    # Accepted: the one step the line names, and the store opens and writes again.
    newest.unlink()
    (store / "_octobrain" / MARKS).unlink()
    done = octobrain(env, "recent", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len({m["id"] for m in json.loads(done.stdout)} & facts) == 2
    memorize(env, "After the loss", "A fact written once the loss was accepted.")
    assert run_cli(env, "doctor")[0] == 0


def _marks(db: Path) -> dict[str, int]:
    record = json.loads((db / "_octobrain" / MARKS).read_text())
    return {name: version for name, version in record.items() if name != RECORDED_AT}


def _newest(db: Path, table: str) -> int:
    return int(StoreLocation(db).connect().open_table(table).version)


def _lose_newest(db: Path, table: str) -> None:
    versions = db / f"{table}.lance" / "_versions"
    _newest_manifest(versions).unlink()
    (versions / HINT).unlink(missing_ok=True)


def test_writers_restores_reembeds_compactions_recreates_and_backups_never_look_like_a_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The local side of `test_team_writes_restores_reembeds_and_recreates_never_look_like_a_
    # lost_version` (object stores), and a store copied back from a backup.
    from octobrain.knowledge import Knowledge
    from octobrain.memory.transfer import reembed
    from octobrain.store import upkeep
    from octobrain.store.migrate import migrate
    from octobrain.store.recreate import recreate

    db = tmp_path / "data" / "db"

    def brain(model: str = "hash:64") -> Brain:
        return Brain(SCOPE, config=Config(), embedder=get_embedder(model), uri=db)

    def knowledge() -> Knowledge:
        return Knowledge(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=db)

    def healthy() -> bool:
        report = diagnose(StoreLocation(db))
        return report.ok

    laptop, desktop = brain(), brain()
    first, _ = laptop.memorize("First", "Deploys go out on Tuesdays.")
    desktop.memorize(
        "Second", "The rate limit is 100 per minute.", related_to=[{"target_id": first.id}]
    )
    laptop.update(first.id, add_files=["deploy.py"])
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nPromote the replica in eu-west-2 first.\n")
    knowledge().index(str(doc))
    # Every commit under either write lock is recorded: the mark is the newest version.
    tables = ("memories", "relationships", "knowledge_sources", "knowledge_chunks")
    assert {t: _marks(db)[t] for t in tables} == {t: _newest(db, t) for t in tables}
    backup = tmp_path / "backup"
    shutil.copytree(db, backup)

    laptop.store.restore(laptop.store.history(2)[1].version)  # a new, higher version
    assert reembed(brain("hash:32")) == 2  # an overwrite: a new, higher version too
    assert _marks(db)["memories"] == _newest(db, "memories") and healthy()
    moved = brain("hash:32")
    monkeypatch.setattr(upkeep, "KEEP_VERSIONS_FOR", timedelta(milliseconds=1))
    moved.store.compact()  # and every version but the newest cleaned up
    assert _marks(db)["memories"] == _newest(db, "memories") and healthy()
    assert len(moved.recent()) == 2

    # Every hint gone (a sync that skips them), the manifests whole: nothing is lost.
    for hint in db.glob(f"*.lance/_versions/{HINT}"):
        hint.unlink()
    assert healthy() and len(brain("hash:32").recent()) == 2

    # The knowledge tables started over by `doctor --recreate` count from 1 again.
    _lose_newest(db, "knowledge_chunks")
    with pytest.raises(TableDamaged, match="knowledge_chunks"):
        knowledge().search("replica")
    assert not healthy()
    recreate(StoreLocation(db), "knowledge", {"knowledge_chunks"})
    assert knowledge().search("replica").hits == []  # made again, empty
    assert healthy()
    knowledge().index(str(doc))
    assert _marks(db)["knowledge_chunks"] == _newest(db, "knowledge_chunks") and healthy()

    # Tables copied back from the backup over the store (their hints come with them), and the
    # whole store copied back: the backup's versions, not a loss.
    for table in ("memories", "relationships"):
        shutil.rmtree(db / f"{table}.lance")
        shutil.copytree(backup / f"{table}.lance", db / f"{table}.lance")
    assert _marks(db)["memories"] > _newest(db, "memories") and healthy()
    assert len(brain().recent()) == 2
    shutil.rmtree(db)
    shutil.copytree(backup, db)
    assert healthy() and len(brain().recent()) == 2

    # A migrate records the versions it made in its target.
    target = tmp_path / "moved" / "db"
    migrate(StoreLocation(db), StoreLocation(target))
    assert _marks(target)["memories"] == _newest(target, "memories")
    assert diagnose(StoreLocation(target)).ok


@pytest.mark.parametrize("garbage", [b'{"memories": 3, "rel', b"[1, 2]", b'{"memories": "3"}'])
def test_a_damaged_version_record_is_named_by_doctor_and_written_again(
    env: dict[str, str], garbage: bytes
) -> None:
    # Commands read it as no record and say nothing (so a lost newest version with its hint
    # goes unnoticed meanwhile), and `doctor` said "ok: nothing is wrong".
    memorize(env, "Fact 0", "Durable fact number 0 about the API.")
    record = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "_octobrain" / MARKS
    record.write_bytes(garbage)
    code, out, _ = run_cli(env, "doctor")
    assert code == 1, out
    assert f"_octobrain/{MARKS}: " in out and "would go unnoticed" in out, out
    assert "the next write to each table records its version again" in out, out
    memorize(env, "Fact 1", "Durable fact number 1 about the API.")
    assert run_cli(env, "doctor")[0] == 0
