"""A FIFO put in place of a file another process's commit just added, under a long-lived
process's background work (the access-count commits, the sleep pass, the resident service's
settling and maintenance): the work is skipped with a log line naming the file, instead of
reading the commit and waiting on the FIFO for a writer for good (and the next call behind it,
on the lock it held)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from octobrain.config import Config, load_config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.sleep_startup import start_background_sleep
from octobrain.server.pool import BrainPool
from octobrain.store import MemoryStore, upkeep

SCOPE = "github.com/acme/api"


def _brain(store: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)


@pytest.fixture
def fifos() -> Iterator[list[Path]]:
    """The FIFOs a test made; afterwards each is opened for writing and closed, so a reader
    still waiting on one (the code before the fix) gets its end, then removed."""
    made: list[Path] = []
    yield made
    for fifo in made:
        with contextlib.suppress(OSError):  # (no reader waiting)
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        fifo.unlink(missing_ok=True)


def _fifo_in_place_of_a_new_file(store: Path, folder: str, fifos: list[Path]) -> str:
    """Another writer's commit, its new files in `memories.lance/<folder>` then replaced by
    FIFOs; the first as a path under the store."""
    where = store / "memories.lance" / folder
    before = set(os.listdir(where))
    _brain(store).memorize("Deploys", "Deploys run on Fridays from the release branch.")
    new = sorted(n for n in set(os.listdir(where)) - before if not n.startswith("_latest"))
    assert new, f"the other writer's commit left no new file in {folder}/"
    for name in new:
        os.remove(where / name)
        os.mkfifo(where / name)
        fifos.append(where / name)
    return f"memories.lance/{folder}/{new[0]}"


def _ends(work: Callable[[], object]) -> bool:
    """Whether `work`, run in a thread, ends within a minute (it waited on a FIFO for good)."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(60)
    return not thread.is_alive()


@pytest.mark.parametrize("folder", ["data", "_versions"])
def test_queued_access_counts_are_not_committed_over_a_fifo(
    tmp_path: Path, folder: str, fifos: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "db"
    brain = _brain(store)
    brain.memorize("Release process", "Releases are cut from main by tagging vX.Y.Z.")
    brain.memorize("Signing keys", "Signing keys live in the vault, rotated every quarter.")
    # A first access count committed: the queue's own connection is open from then on.
    assert brain.remember("release process tagging", limit=1).hits
    brain.flush()
    (hit,) = brain.remember("signing keys vault rotated", limit=1).hits  # queued
    assert hit.memory.title == "Signing keys"
    odd = _fifo_in_place_of_a_new_file(store, folder, fifos)
    with caplog.at_level(logging.WARNING):
        assert _ends(brain.flush), "the access-count commit waited on the FIFO"
    assert f"access counts not recorded: {odd} in the store is not a regular file" in caplog.text


def test_a_sleep_pass_over_a_fifo_is_skipped(
    tmp_path: Path, fifos: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "db"
    brain = _brain(store)
    brain.memorize("Release process", "Releases are cut from main by tagging vX.Y.Z.")
    odd = _fifo_in_place_of_a_new_file(store, "data", fifos)
    with caplog.at_level(logging.WARNING):
        thread = start_background_sleep(brain, marker_dir=tmp_path / "sleep")
        assert thread is not None
        thread.join(60)
        assert not thread.is_alive(), "the sleep pass waited on the FIFO"
    assert f"sleep pass for {SCOPE!r} skipped: {odd} in the store is not a regular" in caplog.text
    assert not (tmp_path / "sleep").exists() or not os.listdir(tmp_path / "sleep")  # not done


@pytest.mark.parametrize("work", ["settle", "maintain"])
def test_the_service_s_settling_and_maintenance_over_a_fifo_are_skipped(
    tmp_path: Path,
    fifos: list[Path],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    work: str,
) -> None:
    store = tmp_path / "db"
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    pool = BrainPool(load_config(), uri=store)
    monkeypatch.setattr(upkeep, "COMPACT_EVERY", 1)  # the next write falls due,
    monkeypatch.setattr(MemoryStore, "defer_maintenance", True)  # run after the answer
    pool.call(SCOPE, None, lambda b: b.memorize("Release process", "Cut from main by a tag."))
    assert work == "settle" or pool.maintenance_due()
    odd = _fifo_in_place_of_a_new_file(store, "data", fifos)
    with caplog.at_level(logging.WARNING):
        assert _ends(getattr(pool, work)), f"the pool's {work} waited on the FIFO"
    said = "settling" if work == "settle" else "maintenance"
    assert f"{said} skipped: {odd} in the store is not a regular file" in caplog.text
