"""`migrate` between a local store and S3: a copy both ways, a copy cut short refused until run
again, a damaged store not copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config, load_config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput, StorageError
from octobrain.memory.brain import Brain
from octobrain.store.location import StoreLocation
from tests.object_store_support import MARKS, S3, SCOPE, s3_brain
from tests.object_store_support import machine as machine  # the fixture, shared
from tests.object_store_support import s3 as s3  # the fixture, shared


def test_migrate_copies_a_local_store_to_s3_and_back(machine: S3, tmp_path: Path) -> None:
    local = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=load_config(), embedder=get_embedder("hash:64"), uri=local)
    first, _ = brain.memorize("First", "The first fact.")
    second, _ = brain.memorize(
        "Second",
        "The second fact.",
        related_to=[{"target_id": first.id, "relationship_type": "extends"}],
    )
    uri = f"s3://{machine.bucket()}/octobrain"
    import obstore

    # A store deleted here but for its record of versions, far above the copy's.
    leftover = StoreLocation(uri, machine.options)
    obstore.put(leftover.objects(), MARKS, json.dumps({"memories": 99}).encode())
    env = {
        "OCTOBRAIN_STORAGE_URI": str(local),
        "OCTOBRAIN_STORAGE_OPTIONS": ",".join(f"{k}={v}" for k, v in machine.options.items()),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    runner = CliRunner()
    up = runner.invoke(main, ["memory", "migrate", "--to", uri, "--format", "json"], env=env)
    assert up.exit_code == 0, up.output
    assert json.loads(up.stdout)["tables"] == {"memories": 2, "relationships": 1}

    remote = s3_brain(machine, uri)
    assert {h.memory.id for h in remote.remember("fact", min_relevance=0.0).hits} == {
        first.id,
        second.id,
    }
    assert [(e.source_id, e.target_id) for e in remote.store.all_relationships()] == [
        (second.id, first.id)
    ]

    again = runner.invoke(main, ["memory", "migrate", "--to", uri], env=env)
    assert again.exit_code == 2
    assert "to: must be an empty location" in again.stderr

    back = tmp_path / "back"
    env_back = {**env, "OCTOBRAIN_STORAGE_URI": uri}
    down = runner.invoke(main, ["memory", "migrate", "--to", str(back)], env=env_back)
    assert down.exit_code == 0, down.output
    home = Brain(SCOPE, config=load_config(), embedder=get_embedder("hash:64"), uri=back)
    assert home.get(second.id).content == "The second fact."


def test_a_migrate_cut_short_leaves_a_store_that_refuses_to_open_until_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Killed after its first table: the copy holds part of the store. Pointed at it, every
    # command must say so, never answer as a store with fewer rows (`total: 0`).
    from octobrain.store import migrate as migrate_module
    from octobrain.store.doctor import diagnose

    source = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=source)
    first, _ = brain.memorize("First", "The first fact.")
    brain.memorize("Second", "The second fact.", related_to=[{"target_id": first.id}])
    real, checked = migrate_module._verify, []

    def cut_short(*args: object) -> None:
        checked.append(1)
        if len(checked) == 2:  # the second table copied, then the process is stopped
            raise KeyboardInterrupt
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(migrate_module, "_verify", cut_short)
    target = StoreLocation(str(tmp_path / "there"))
    with pytest.raises(KeyboardInterrupt):
        migrate_module.migrate(StoreLocation(str(source)), target)
    monkeypatch.setattr(migrate_module, "_verify", real)
    copy = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "there")
    with pytest.raises(StorageError, match="`memory migrate` from .* was cut short"):
        copy.recent()
    assert any("was cut short" in p.problem for p in diagnose(target).problems)
    other = tmp_path / "other" / "db"
    Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=other).memorize(
        "Other store", "Another fact."
    )
    with pytest.raises(InvalidInput, match="must be an empty location.*was cut short"):
        migrate_module.migrate(StoreLocation(str(other)), target)  # (another store's copy)
    # The same migrate again starts the copy over: a store that opens, its tables recorded.
    migrate_module.migrate(StoreLocation(str(source)), target)
    assert diagnose(target).ok and diagnose(target).manifest == "ok"
    whole = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "there")
    assert len(whole.recent()) == 2


def test_migrate_refuses_a_damaged_store_instead_of_copying_what_it_reads(tmp_path: Path) -> None:
    # The newest edge version lost: listed and read as they were, the tables made a copy with
    # the edges `forget` had removed (to a memory that is gone), "verified", `doctor` ok.
    from octobrain.store.migrate import migrate

    source = tmp_path / "here" / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=source)
    first, _ = brain.memorize("First", "The first fact.")
    brain.memorize("Second", "The second fact.", related_to=[{"target_id": first.id}])
    brain.forget([first.id], confirm=True)
    versions = sorted((source / "relationships.lance" / "_versions").glob("*.manifest"))
    versions[0].unlink()  # (names count down: the first is the newest)
    target = StoreLocation(str(tmp_path / "there"))
    with pytest.raises(StorageError, match=r"is damaged: relationships: .*nothing was copied"):
        migrate(StoreLocation(str(source)), target)
    assert not (tmp_path / "there").exists() or not list((tmp_path / "there").glob("*.lance"))
