"""The mirror's memory-mapped snapshot: a new process opens it instead of reading the store, still
sees every acknowledged write, and keeps serving while the snapshot is rewritten or removed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.memory.corpus import Corpus
from octobrain.memory.snapshot import CURRENT, SnapshotDir
from tests.snapshot_support import (
    TOPICS,
    _brain,
    _current,
    _fill,
    _found,
    _opened_from_snapshot,
    _snap_dir,
)
from tests.snapshot_support import data_dir as data_dir  # the fixture, shared


def test_a_mirror_that_built_itself_reads_its_snapshot_once_written(tmp_path: Path) -> None:
    # What a process built from the store is dropped for the mapped snapshot it wrote (so a
    # long-lived service holds no more than one that opened it), with every write still seen.
    brain = _brain(tmp_path / "db")
    ids = _fill(brain)
    assert _found(brain, "zq3 setting")[0] == ids[3]  # built, then the snapshot written
    corpus = brain.retriever.corpus
    assert not corpus.reads_snapshot and not corpus.opened_snapshot
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    added, _ = writer.memorize("Fresh note on cache", "The cache service uses setting zqnew.")
    writer.forget([ids[4]], confirm=True)
    own, _ = brain.memorize("Own note on deploy", "The deploy service uses setting zqown.")
    assert _found(brain, "zqnew")[0] == added.id
    assert corpus.reads_snapshot and not corpus.opened_snapshot  # adopted, not opened
    assert _found(brain, "zqown")[0] == own.id
    assert ids[4] not in _found(brain, "zq4 setting", limit=50)
    assert _found(brain, "setting", limit=50) == _found(
        _brain(tmp_path / "db"), "setting", limit=50
    )


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_a_mirror_reads_the_snapshot_it_rewrote_not_the_one_it_opened(tmp_path: Path) -> None:
    # A long-lived process (the resident service) that rewrites the snapshot lets the files
    # it opened go: mapping both kept every page of the old one resident (83 MB of rows at
    # 100k, all made resident by the write), besides the rows it had read since.
    ids = _fill(_brain(tmp_path / "db"))
    assert _found(_brain(tmp_path / "db"), "zq3 setting")[0] == ids[3]  # built and written
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zq3 setting")[0] == ids[3] and _opened_from_snapshot(reader)
    opened = _current(reader)
    more = _fill(_brain(tmp_path / "db", snapshot_min_rows=0), 300, " (more)")  # a rewrite is due
    assert _found(reader, "zq299 setting")[0] == more[299]  # caught up, then rewritten
    rewritten = _current(reader)
    assert rewritten != opened
    assert set(_found(reader, "zq7 setting")[:2]) == {ids[7], more[7]}
    mapped = Path("/proc/self/maps").read_text()
    assert str(rewritten) in mapped and str(opened) not in mapped
    assert len(reader.retriever.corpus) == 340


def test_one_answer_mixes_the_snapshots_rows_and_the_rows_read_since(tmp_path: Path) -> None:
    # The rows of a mirror that caught up live in two places (the snapshot's mapped rows, the
    # rows read since) and are taken from each in place: every hit still gets its own row.
    ids = _fill(_brain(tmp_path / "db"))
    assert _found(_brain(tmp_path / "db"), "zq3 setting")[0] == ids[3]  # the snapshot
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zq3 setting")[0] == ids[3] and _opened_from_snapshot(reader)
    later = _fill(_brain(tmp_path / "db", snapshot_min_rows=0), 10, " (later)")  # no rewrite
    hits = reader.remember("setting", min_relevance=0.0, record_access=False, limit=50).hits
    number = {mid: i for i, mid in enumerate(ids)} | {mid: i for i, mid in enumerate(later)}
    assert len(hits) == 50 and {h.memory.id for h in hits} == set(number)
    for hit in hits:
        i = number[hit.memory.id]
        assert f"setting zq{i} = {i * 7}." in hit.memory.content
        assert hit.memory.tags == [TOPICS[i % len(TOPICS)]]
    corpus = reader.retriever.corpus
    corpus._cache.clear()
    mixed = [mid for pair in zip(later, ids[::-1], strict=False) for mid in pair]
    at = np.asarray([corpus.pos_of[mid] for mid in mixed], dtype=np.int64)
    assert corpus.fields_at(at)["id"] == mixed
    assert [m.id for m in corpus.memories_at(at.tolist())] == mixed


def test_a_new_process_opens_the_snapshot_and_sees_later_writes(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    assert _found(first, "zq3 setting")[0] == ids[3]
    assert _snap_dir(first).load() is not None  # written after the first load
    # Another process writes: a new memory, an edit and a forget.
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    added, _ = writer.memorize("Fresh note on cache", "The cache service uses setting zqnew.")
    writer.update(ids[5], content="The queue service now uses setting zqedited.")
    writer.forget([ids[3]], confirm=True)

    reader = _brain(tmp_path / "db")
    assert _found(reader, "zqnew")[0] == added.id
    assert _opened_from_snapshot(reader)
    assert _found(reader, "zqedited")[0] == ids[5]
    assert ids[3] not in _found(reader, "zq3 setting", limit=50)
    assert len(reader.retriever.corpus) == 40
    # …and a write after the reader opened is visible on its next call.
    later, _ = writer.memorize(
        "Later note on auth", "The auth service uses setting zqlater.", tags=["auth"]
    )
    assert _found(reader, "zqlater")[0] == later.id
    # Filters answer from the mapped columns and the rows appended since.
    assert _found(reader, "setting", tags=["cache"], limit=50)
    assert set(_found(reader, "setting", tags=["auth"], limit=50)) >= {later.id}
    # Ids to positions in bulk, as one at a time: mapped, appended, forgotten, unknown ones.
    corpus = reader.retriever.corpus
    asked = [ids[0], later.id, ids[3], added.id, "no-such-id", "x" * 80, ids[5], ""]
    one_by_one = [corpus.pos_of.get(mid, -1) for mid in asked]
    assert corpus.positions_of(asked).tolist() == one_by_one
    assert one_by_one[2] == one_by_one[4] == one_by_one[5] == -1 and min(one_by_one[:2]) >= 0


def test_a_snapshot_holds_no_memory_object_per_row(tmp_path: Path) -> None:
    _fill(_brain(tmp_path / "db"), 1000)
    _found(_brain(tmp_path / "db"), "zq3 setting")  # writes the snapshot
    reader = _brain(tmp_path / "db")
    _found(reader, "zq7 setting", limit=5)
    corpus = reader.retriever.corpus
    assert _opened_from_snapshot(reader)
    # Memory objects only for what was ranked (at most both legs' candidates), not per row.
    assert len(corpus) == 1000 and len(corpus._cache) <= 2 * reader.config.search.candidates


def test_a_commit_during_the_snapshot_build_is_caught_up_by_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _brain(tmp_path / "db")
    _fill(first)
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    original = Corpus.snapshot
    raced: list[str] = []

    def snapshot_then_write(self: Corpus) -> Any:
        snap = original(self)
        memory, _ = writer.memorize(
            "Racing note", "Committed while the snapshot is written zqrace."
        )
        raced.append(memory.id)
        return snap

    with monkeypatch.context() as patched:
        patched.setattr(Corpus, "snapshot", snapshot_then_write)
        _found(first, "zq1 setting")
    assert raced
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zqrace")[0] == raced[0]
    assert _opened_from_snapshot(reader)


def test_a_cache_that_cannot_be_written_never_fails_a_query_nor_retries_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[int] = []

    def full_disk(self: SnapshotDir, snap: Any) -> Path:
        tries.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SnapshotDir, "write", full_disk)
    brain = _brain(tmp_path / "db")
    ids = _fill(brain)
    assert _found(brain, "zq3 setting")[0] == ids[3]
    assert _found(brain, "zq4 setting")[0] == ids[4]
    assert tries == [1] and "snapshot not written" in caplog.text


def test_the_snapshot_is_written_after_the_answer_never_half_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    release, started = threading.Event(), threading.Event()
    original = SnapshotDir.write

    def slow_write(self: SnapshotDir, snap: Any) -> Path:
        started.set()
        assert release.wait(60)
        return original(self, snap)

    monkeypatch.setattr(SnapshotDir, "write", slow_write)
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    hits = first.remember("zq3 setting", min_relevance=0.0, record_access=False).hits
    assert hits[0].memory.id == ids[3]  # answered while the snapshot is still being written
    assert started.wait(60)
    snaps = first._snapshots()
    assert snaps is not None and not (snaps.path / CURRENT).exists()
    # The mirror keeps serving (and changing) meanwhile; what is written is the captured state.
    added, _ = first.memorize("Fresh note on cache", "The cache service uses setting zqnew.")
    assert _found(_brain(tmp_path / "db", snapshot_min_rows=0), "zqnew")[0] == added.id
    release.set()
    first.retriever.corpus.wait_for_snapshot()
    snap = snaps.load()
    assert snap is not None and int(snap.columns["live"].sum()) == 40
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zqnew")[0] == added.id  # caught up from the snapshot's version
    assert _opened_from_snapshot(reader)


def test_a_snapshot_deleted_while_a_process_serves_from_it_keeps_serving(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    expected = _found(first, "zq9 setting")
    reader = _brain(tmp_path / "db")
    reader.retriever.corpus.refresh()  # opened: its large files are not verified yet
    assert _opened_from_snapshot(reader)
    shutil.rmtree(_snap_dir(first).path.parent)  # `rm -rf <data dir>/cache/snapshots`
    assert _found(reader, "zq9 setting") == expected and expected[0] == ids[9]
    assert _found(reader, "zq2 setting")[0] == ids[2]


def test_a_snapshot_replaced_while_it_is_being_opened_is_read_from_its_successor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer of a newer snapshot removes the others once it is current; a process that had
    # read the old one's manifest, not yet opened its vectors, failed its command with
    # FileNotFoundError (seen in a benchmark run).
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    expected = _found(first, "zq9 setting")
    reader = _brain(tmp_path / "db")
    snapshots = reader.retriever.corpus._snapshots
    assert snapshots is not None
    load, gone = snapshots.load, []

    def load_then_lose_it() -> Any:
        snap = load()
        if not gone and snap is not None:  # the first time: removed after its manifest
            gone.append(snap)
            shutil.rmtree(next(iter(snap.checks.values())).path.parent)
        return snap

    monkeypatch.setattr(snapshots, "load", load_then_lose_it)
    assert _found(reader, "zq9 setting") == expected and expected[0] == ids[9]
    assert gone and _found(reader, "zq2 setting")[0] == ids[2]


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_a_rewritten_snapshot_holds_every_rows_own_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
) -> None:
    # The older snapshot's vectors go to the rewritten one from file to file (the kernel's
    # copy of their whole blocks), or read verified where the kernel cannot copy them, never
    # through the mapping: the same bytes.
    import os

    copies: list[int] = []
    real = getattr(os, "copy_file_range", None)

    def copy(*args: Any) -> int:
        copies.append(args[2])
        if real is None or not kernel_copy:
            raise OSError("no copy here")
        return int(real(*args))

    monkeypatch.setattr("os.copy_file_range", copy, raising=False)
    ids = _fill(_brain(tmp_path / "db"), 600)  # (vectors past two 64 KiB blocks)
    assert _found(_brain(tmp_path / "db"), "zq3 setting")[0] == ids[3]
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zq3 setting")[0] == ids[3] and _opened_from_snapshot(reader)
    opened = _current(reader)
    more = _fill(_brain(tmp_path / "db", snapshot_min_rows=0), 700, " (more)")
    assert _found(reader, "zq699 setting")[0] == more[699]
    rewritten = _current(reader)
    assert rewritten != opened
    assert copies  # (the older snapshot's rows were copied, or tried)
    stored = reader.store.memories.to_arrow().select(["id", "embedding"]).to_pylist()
    want = {row["id"]: row["embedding"] for row in stored}
    snap = _snap_dir(reader).load()
    assert snap is not None and snap.where == rewritten
    held = snap.rows.column("id").to_pylist()
    assert sorted(held) == sorted(ids + more)
    assert np.array_equal(np.asarray(snap.vectors), np.asarray([want[m] for m in held], np.float32))
