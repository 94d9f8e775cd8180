"""The mirror's memory-mapped snapshot: a new process opens it instead of reading the store,
still sees every acknowledged write, and never serves a stale, damaged or half-written one."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.corpus import Corpus
from octobrain.memory.page_check import PageCheck, SnapshotDamaged
from octobrain.memory.snapshot import CURRENT, LAZY, SnapshotDir

SCOPE = "github.com/acme/api"
TOPICS = ["cache", "queue", "auth", "billing", "search", "deploy", "metrics", "backup"]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _brain(uri: Path, **search: Any) -> Brain:
    config = Config(search=SearchConfig(**{"snapshot_min_rows": 1, **search}))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)


def _fill(brain: Brain, n: int = 40, batch: str = "") -> list[str]:
    """`n` memories; a second fill of the same store names its `batch`, so that its memories
    are new ones, not copies of the first fill's (shown once)."""
    from octobrain.models import Memory

    memories = [
        Memory(
            title=f"Note {i} on {TOPICS[i % len(TOPICS)]}{batch}",
            content=f"The {TOPICS[i % len(TOPICS)]} service uses setting zq{i} = {i * 7}.",
            scope=SCOPE,
            tags=[TOPICS[i % len(TOPICS)]],
        )
        for i in range(n)
    ]
    vectors = brain.embedder.embed_documents([m.searchable_text() for m in memories])
    brain.store.add(memories, vectors)
    return [m.id for m in memories]


def _found(brain: Brain, query: str, **kw: Any) -> list[str]:
    hits = brain.remember(query, min_relevance=0.0, record_access=False, **kw).hits
    # As when its process exits: a snapshot due after this query is written in the background.
    brain.retriever.corpus.wait_for_snapshot()
    return [h.memory.id for h in hits]


def _snap_dir(brain: Brain) -> SnapshotDir:
    brain.retriever.corpus.wait_for_snapshot()  # (written after the answer)
    snaps = brain._snapshots()
    assert snaps is not None
    return snaps


def _current(brain: Brain) -> Path:
    snaps = _snap_dir(brain)
    return snaps.path / (snaps.path / CURRENT).read_text(encoding="utf-8")


def _opened_from_snapshot(brain: Brain) -> bool:
    return brain.retriever.corpus.opened_snapshot


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


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


def _zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def _wrong_format(path: Path) -> None:
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["format"] = 999
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _wrong_positions(path: Path) -> None:
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["positions"] += 1
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _scope_renamed(path: Path) -> None:
    # One letter of the scope's name in the manifest's codes, as a bit flipped on disk does
    # (the file stays JSON, every other check holds).
    text = path.read_text(encoding="utf-8")
    assert text.count(f'"{SCOPE}"') == 1
    path.write_text(text.replace(f'"{SCOPE}"', f'"{SCOPE[:-1]}j"'), encoding="utf-8")


@pytest.mark.parametrize(
    ("file", "damage"),
    [
        ("vectors.npy", _flip),
        ("vectors.npy", _zero),  # (numpy took it for pickled data: "load it with allow_pickle")
        ("rows.arrow", _flip),
        ("state.npy", _flip),
        ("bm25.docs.npy", _flip),
        ("bm25.term_ends.npy", _truncate),
        ("ids.npy", _truncate),
        ("manifest.json", _wrong_format),
        ("manifest.json", _wrong_positions),
        ("manifest.json", _scope_renamed),  # (served: the project's memories found by none)
    ],
)
def test_a_damaged_snapshot_is_detected_rebuilt_and_never_served(
    tmp_path: Path, file: str, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    expected = _found(first, "zq9 setting")
    damaged = _current(first)
    damage(damaged / file)
    lazy = file in LAZY and damage is not _zero  # (zeroed: no array header to map)
    # (`rows.arrow`'s headers are checked at open: here one block holds all of it; a block
    # found as it is read is `test_snapshot_get_stats.py`'s)
    if lazy:  # checked as it is read: the first query finds it
        assert _snap_dir(first).load() is not None
    else:
        assert _snap_dir(first).load() is None
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zq9 setting") == expected
    assert expected[0] == ids[9]
    assert "damaged" in caplog.text if lazy else "not used" in caplog.text
    if not lazy:  # the look above, then the reader's once (its refresh asked twice: said twice)
        assert caplog.text.count("not used") == 2, caplog.text
    assert "allow_pickle" not in caplog.text  # no damaged file is loaded "unsafely"
    # The rebuild wrote a sound snapshot in its place, which the next process opens.
    assert _current(reader) != damaged and not damaged.exists()
    again = _brain(tmp_path / "db")
    assert _found(again, "zq9 setting") == expected
    assert _opened_from_snapshot(again)


def test_a_snapshot_copied_under_another_model_is_not_used(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    _fill(first)
    _found(first, "zq1")
    snaps = _snap_dir(first)
    other = SnapshotDir(snaps.path.parent, snaps.uri, "hash:64", 32)
    other.path.mkdir(parents=True)
    shutil.copytree(_current(first), other.path / "copied")
    (other.path / CURRENT).write_text("copied", encoding="utf-8")
    assert snaps.load() is not None
    assert other.load() is None  # its manifest names dim 64


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from octobrain.memory.brain import Brain
    from octobrain.config import Config, SearchConfig
    from octobrain.embed.factory import get_embedder
    from octobrain.memory import corpus_apply, snapshot

    corpus_apply.SNAPSHOT_STALE_ROWS = 1  # rewrite after any re-read row
    original = snapshot._write_synced
    def die_before_manifest(path, data):
        if path.name == snapshot.MANIFEST:  # every data file is written; the manifest is not
            os.kill(os.getpid(), signal.SIGKILL)
        original(path, data)
    snapshot._write_synced = die_before_manifest
    config = Config(search=SearchConfig(snapshot_min_rows=1))
    brain = Brain(sys.argv[2], config=config, embedder=get_embedder("hash:64"), uri=sys.argv[1])
    brain.remember("zqkilled", min_relevance=0.0, record_access=False)
    """
)


def test_a_writer_killed_mid_snapshot_leaves_the_old_one_in_force(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    _found(first, "zq1")
    before = _current(first)
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    writer.update(ids[4], content="The cache service uses setting zqkilled.")
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path / "db"), SCOPE],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert _current(first) == before  # CURRENT still names the old, complete snapshot
    assert any(p.name.startswith(".tmp-") for p in _snap_dir(first).path.iterdir())
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zqkilled")[0] == ids[4]
    assert _opened_from_snapshot(reader)
    # The next snapshot written drops what the dead writer left (before: kept for an hour,
    # a snapshot's size each: 13 killed writers left 280 MB at 10,000 memories).
    reader.memorize("Fresh note", "The cache uses setting zqnew.")
    reader.retriever.corpus.save_snapshot()
    assert [p.name for p in _snap_dir(reader).path.iterdir() if p.name.startswith(".tmp-")] == []


def test_the_ann_path_returns_the_exact_top_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import upkeep

    exact = _brain(tmp_path / "db", snapshot_min_rows=0)
    _fill(exact, 600)
    monkeypatch.setattr(upkeep, "VECTOR_INDEX_MIN_ROWS", 300)
    exact.store.compact()  # builds the IVF-PQ index the ANN path searches
    assert "embedding" in {ix.columns[0] for ix in exact.store.memories.list_indices()}
    monkeypatch.setattr("octobrain.memory.ann.ANN_EXACT_BELOW", 0)
    ann = _brain(tmp_path / "db", ann_min_rows=100, snapshot_min_rows=0)
    for query in ["zq17 setting", "billing service setting", "deploy zq301", "metrics backup"]:
        want = _found(exact, query, limit=10)
        got = _found(ann, query, limit=10)
        assert got[:5] == want[:5], query
        assert len(set(got) & set(want)) >= 9, query


def test_the_ann_path_filters_on_the_mirror_and_falls_back_to_the_prefilter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Most rows allowed: the index is searched unfiltered and the mirror's mask keeps the
    # allowed ones; a narrow filter, or one the unfiltered nearest rows hardly meet, is
    # handed to LanceDB as a prefilter. Either way only allowed rows come back, the exact best.
    from octobrain.kernels.hybrid import exact_top
    from octobrain.memory import ann as ann_module
    from octobrain.memory.query import Filters
    from octobrain.models import Memory, MemoryType
    from octobrain.store import memories as store_module
    from octobrain.store import upkeep
    from octobrain.store.sql import visible_scopes

    exact = _brain(tmp_path / "db", snapshot_min_rows=0)
    _fill(exact, 600)
    more = [
        Memory(
            title=f"Note {i} on {TOPICS[i % len(TOPICS)]}",
            content=f"The {TOPICS[i % len(TOPICS)]} service uses setting zq{i} = {i * 7}.",
            scope="github.com/acme/web",  # another project: never visible from SCOPE
        )
        for i in range(400)
    ] + [
        Memory(
            title=f"Garden bed {i}",
            content=f"Tomato variety kq{i} grows best beside basil, watered at dawn.",
            scope=SCOPE,
            memory_type=MemoryType.DECISION,
            tags=["shade"] if i % 10 == 0 else [],  # 20 of them
        )
        for i in range(200)
    ]
    exact.store.add(more, exact.embedder.embed_documents([m.searchable_text() for m in more]))
    monkeypatch.setattr(upkeep, "VECTOR_INDEX_MIN_ROWS", 300)
    exact.store.compact()
    monkeypatch.setattr(ann_module, "ANN_EXACT_BELOW", 0)
    wheres: list[str | None] = []
    search_index = store_module.MemoryStore.vector_search

    def spy(self: Any, vector: Any, where: str | None, k: int, **kw: Any) -> Any:
        wheres.append(where)
        return search_index(self, vector, where, k, **kw)

    monkeypatch.setattr(store_module.MemoryStore, "vector_search", spy)
    ann = _brain(tmp_path / "db", ann_min_rows=100, snapshot_min_rows=0)
    for query, types, searched in [
        ("billing service setting", [], [None]),  # 800 of 1,200 rows allowed
        ("tomato basil garden", [], [None]),
        ("tomato basil garden", ["decision"], ["prefilter"]),  # 200 of 1,200
    ]:
        wheres.clear()
        want = _found(exact, query, limit=10, memory_types=types)
        got = _found(ann, query, limit=10, memory_types=types)
        assert ["prefilter" if w else w for w in wheres] == searched, query
        assert got[:5] == want[:5], query
        assert len(set(got) & set(want)) >= 9, query
    # Unfiltered first, as if most rows were allowed, where the query's nearest rows are not:
    monkeypatch.setattr(ann_module, "ANN_POSTFILTER_SHARE", 0.0)
    corpus = ann.retriever.corpus
    allowed = corpus.allowed(visible_scopes(SCOPE), memory_types=["decision"])
    vector = ann.embedder.embed_query(["the billing service uses setting"])[0]
    everything = np.ones(corpus.position_count, dtype=bool)
    # (5 × ANN_REFINE / (200 / 1,200) nearest rows: notes, not one garden bed)
    nearest = 5 * ann_module.ANN_REFINE * 6
    assert not allowed[exact_top(corpus.vectors.cosines(vector), everything, nearest)].any()

    def index_as_exact(self: Any, vector: Any, where: str | None, k: int, **kw: Any) -> Any:
        # The index is approximate: now and then (its partitions are trained at random) its
        # unfiltered answer held a garden bed or five the exact nearest rows do not. Here it
        # answers as the exact ones do, none allowed, so the fallback is what is tested.
        addrs, cosines = spy(self, vector, where, k, **kw)
        if where is not None:
            return addrs, cosines
        pos = corpus.positions_at(addrs)
        keep = ~((pos >= 0) & allowed[np.maximum(pos, 0)])
        return addrs[keep], cosines[keep]

    monkeypatch.setattr(store_module.MemoryStore, "vector_search", index_as_exact)
    wheres.clear()
    filters = Filters(memory_types=(MemoryType.DECISION,))
    got = ann.retriever._ann(vector, filters.where(SCOPE), 5, allowed)
    assert ["prefilter" if w else w for w in wheres] == [None, "prefilter"]
    assert allowed[got].all() and len(got) == 5
    monkeypatch.setattr(ann_module, "ANN_POSTFILTER_SHARE", 1.0)  # the prefilter alone
    assert ann.retriever._ann(vector, filters.where(SCOPE), 5, allowed) == got
    # A tag only 20 garden beds carry, asked with a query about billing: the prefilter holds
    # the tag too, so the index's nearest rows meeting it are found (not 50 billing notes the
    # mask then drops), and the vector leg is the exact one.
    shade = Filters(tags=("shade",))
    allowed = corpus.allowed(visible_scopes(SCOPE), tags=["shade"])
    got = ann.retriever._ann(vector, shade.where(SCOPE), 5, allowed)
    assert got == exact_top(corpus.vectors.cosines(vector), allowed, 5)


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


def test_a_lazily_checked_file_is_verified_block_by_block_as_it_is_read(tmp_path: Path) -> None:
    import zlib

    import numpy as np

    path = tmp_path / "vectors.npy"
    data = bytearray(np.random.default_rng(1).bytes(3 * 4096 + 100))
    path.write_bytes(bytes(data))
    crcs = [zlib.crc32(bytes(data[i : i + 4096])) for i in range(0, len(data), 4096)]
    data[2 * 4096 + 7] ^= 0x01  # one bit of the third block
    path.write_bytes(bytes(data))
    check = PageCheck(path, crcs, block=4096)
    check.ranges(np.array([10, 4096]), np.array([300, 8192]))  # blocks 0 and 1: sound
    assert check.ok.tolist() == [True, True, False, False]
    with pytest.raises(SnapshotDamaged, match="block 2"):
        check.ranges(np.array([8000]), np.array([8300]))  # straddles into block 2
    with pytest.raises(SnapshotDamaged):
        check.everything()
    assert not check.ok[2]


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


def test_a_snapshot_of_another_store_at_the_same_location_is_never_served(tmp_path: Path) -> None:
    # The store at a path replaced by another one (a copy from another machine, one re-created
    # by hand) at the same version with as many rows: the snapshot, keyed by the path, agrees
    # on both, yet holds the old store's rows.
    old = _brain(tmp_path / "db")
    old_ids = _fill(old, 40)
    assert set(_found(old, "setting zq3")) <= set(old_ids)
    _snap_dir(old)
    other = _brain(tmp_path / "other")
    new_ids = _fill(other, 40)
    assert other.store.version() == old.store.version()
    shutil.move(tmp_path / "db", tmp_path / "old-db")
    shutil.copytree(tmp_path / "other", tmp_path / "db")
    fresh = _brain(tmp_path / "db")
    found = _found(fresh, "setting zq3")
    assert found and set(found) <= set(new_ids)
    assert not _opened_from_snapshot(fresh)
    # A copy of the same store (a backup put back) still opens from its snapshot.
    again = _brain(tmp_path / "db")
    assert set(_found(again, "setting zq3")) <= set(new_ids)
    assert _opened_from_snapshot(again)


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
