"""A forget by id (`Brain.forget_targets`, which `memory forget` and the MCP `forget` tool use)
resolves all the ids it is given in a bounded number of reads, refusing each as a read by id
does."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.store import MemoryStore, NotFound


def _brain(tmp_path: Path, scope: str) -> Brain:
    return Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db")


def test_forget_targets_of_many_ids_reads_the_store_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each id was read on its own (a prefix twice: its candidates, then the memory): `memory
    # forget` of 50 ids made 50-100 reads of a 10,000-memory store.
    brain = _brain(tmp_path, "github.com/acme/api")
    ids = [
        brain.memorize(f"Fact number {i}", f"Durable fact number {i} about the API.")[0].id
        for i in range(40)
    ]
    scans = []
    real_scan = MemoryStore.scan
    monkeypatch.setattr(
        MemoryStore, "scan", lambda self, *a, **k: scans.append(a) or real_scan(self, *a, **k)
    )
    given = [mid if i % 2 else mid[:8] for i, mid in enumerate(ids)]  # full ids and prefixes
    targets, damaged = brain.forget_targets(given)
    assert [m.id for m in targets] == ids and not damaged
    assert [m.title for m in targets] == [f"Fact number {i}" for i in range(40)]
    assert len(scans) <= 2, len(scans)
    scans.clear()
    assert brain.forget([m.id for m in targets], confirm=True).deleted == 40
    assert len(scans) <= 1, len(scans)


def test_forget_targets_refuses_each_id_as_a_read_by_id_does(tmp_path: Path) -> None:
    api = _brain(tmp_path, "github.com/acme/api")
    mine = api.memorize("Fact about the api", "Durable fact about the API.")[0].id
    web = _brain(tmp_path, "github.com/acme/web")
    theirs = web.memorize("Fact about the web", "Durable fact about the web app.")[0].id
    for given in (theirs, theirs[:8], "not-an-id", "0000000000"):
        with pytest.raises((NotFound, InvalidInput)) as by_get:
            api.get(given)
        with pytest.raises(type(by_get.value)) as by_forget:
            api.forget_targets([mine, given, "also-not-an-id"])  # the first refused, in order
        assert str(by_forget.value) == str(by_get.value)
    assert [m.id for m in api.forget_targets([mine, mine[:8]])[0]] == [mine, mine]
