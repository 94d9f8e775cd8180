"""A mirror built from the whole store reads it in small batches: whatever the batch size, and
whether its vectors and strings go to a scratch directory or stay in memory, it is the mirror a
single read of every row gives (same rows in the same positions, index, vectors, columns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.kernels.bm25 import PARTS
from octobrain.memory import build, corpus_apply
from octobrain.memory.brain import Brain
from octobrain.memory.catchup import READ, fragment_mark
from octobrain.memory.corpus import Corpus
from octobrain.memory.snapshot import CURRENT, Snapshot, SnapshotDir
from octobrain.models import Memory, MemoryType, Source, State
from tests.snapshot_support import SCOPE, TOPICS, _brain, _found
from tests.snapshot_support import data_dir as data_dir  # the autouse data directory, shared


def _varied(brain: Brain, n: int = 45) -> None:
    """Rows that exercise every mirrored column: scopes, states, types, sources, tags, files,
    an unset optional column, and texts of uneven length (some empty parts)."""
    memories = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        memories.append(
            Memory(
                title=f"Note {i} on {topic}" if i % 5 else "",
                content=f"The {topic} service uses setting zq{i}. " * (1 + i % 4),
                scope="" if i % 7 == 0 else SCOPE,
                memory_type=list(MemoryType)[i % len(MemoryType)],
                source=list(Source)[i % len(Source)],
                state=State.ARCHIVED if i % 11 == 3 else State.WORKING,
                tags=[topic, f"t{i % 3}"][: i % 3],
                related_files=[f"src/{topic}.py"] if i % 4 == 1 else [],
                context=f"ünïcode context {i}" if i % 6 == 2 else "",
            )
        )
    vectors = brain.embedder.embed_documents([m.searchable_text() for m in memories])
    brain.store.add(memories, vectors)


def _one_read(brain: Brain) -> Corpus:
    """The mirror as a single read of every row makes it (the catch-up's path)."""
    from octobrain.memory.corpus_io import vectors_of

    corpus = Corpus(brain.store)
    version = brain.store.version()
    rows = brain.store.pinned(version).scan_arrow("true", columns=READ)
    addrs = np.asarray(rows.column("_rowaddr"), dtype=np.int64)
    corpus_apply.add(corpus, rows, vectors_of(rows), addrs)
    corpus._index_ids()
    corpus._mark = fragment_mark(addrs)
    return corpus


def _same(snap: Snapshot, corpus: Corpus) -> None:
    assert snap.rows.equals(corpus.rows())
    assert snap.rows.schema.equals(corpus.rows().schema, check_metadata=True)
    assert np.array_equal(np.asarray(snap.vectors), corpus.vectors.dense())
    built, read = snap.index.to_parts(), corpus.index.to_parts()
    for name in PARTS:
        assert np.array_equal(built[name], read[name]), name
    columns = {
        "live": corpus._live,
        "edit_key": corpus._edit_key,
        "rowaddr": corpus._addr,
        "access_count": corpus._access,
        "last_accessed": corpus._seen,
        "created": corpus._created,
        **corpus._coded,
    }
    for name, column in columns.items():
        assert np.array_equal(snap.columns[name], column), name
    assert snap.codes == corpus._codes
    assert np.array_equal(snap.sorted_ids, corpus._sorted_ids)
    assert np.array_equal(snap.id_order, corpus._id_order)
    assert snap.mark == corpus._mark


@pytest.mark.parametrize("batch_rows", [1, 7, 10_000])
@pytest.mark.parametrize("in_scratch", [True, False])
def test_a_streamed_build_is_the_mirror_one_read_gives(
    tmp_path: Path, batch_rows: int, in_scratch: bool
) -> None:
    brain = _brain(tmp_path / "db")
    _varied(brain)
    brain.memorize("Late note", "Written in a later commit, so in another fragment.")
    expected = _one_read(brain)
    version = brain.store.version()
    scratch = tmp_path / "scratch" if in_scratch else None
    if scratch is not None:
        scratch.mkdir()
    snap = build.build(
        brain.store.pinned(version), version, 64, scratch=scratch, batch_rows=batch_rows
    )
    _same(snap, expected)
    assert isinstance(snap.vectors, np.memmap) == in_scratch
    if scratch is not None:  # only the vectors are left, which the result maps
        assert [p.name for p in scratch.iterdir()] == ["vectors.npy"]


def test_a_string_column_past_32_bit_offsets_is_split_not_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (A column holding more than 2 GiB of text is one array per 2 GiB; shown at 100 bytes.)
    brain = _brain(tmp_path / "db")
    _varied(brain)
    monkeypatch.setattr(build, "_INT32_MAX", 100)
    version = brain.store.version()
    snap = build.build(brain.store.pinned(version), version, 64, batch_rows=4)
    assert snap.rows.column("content").num_chunks > 1
    assert snap.rows.equals(_one_read(brain).rows())


def test_a_build_leaves_no_scratch_behind_and_its_snapshot_serves_the_same(
    tmp_path: Path,
) -> None:
    brain = _brain(tmp_path / "db")
    _varied(brain, 60)
    first = _found(brain, "setting", limit=50)  # built (vectors in a scratch file), written
    snaps = brain._snapshots()
    assert isinstance(snaps, SnapshotDir)
    assert [p.name for p in snaps.path.iterdir() if p.name.startswith(".tmp-")] == []
    current = snaps.path / (snaps.path / CURRENT).read_text(encoding="utf-8")
    assert np.load(current / "vectors.npy").shape == (60, 64)
    reader = _brain(tmp_path / "db")
    assert _found(reader, "setting", limit=50) == first
    assert reader.retriever.corpus.opened_snapshot


def test_a_cache_without_room_for_the_build_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full_disk(self: SnapshotDir) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(SnapshotDir, "scratch", full_disk)
    brain = _brain(tmp_path / "db")
    _varied(brain)
    assert _found(brain, "zq3 setting")  # built in memory
    assert "not built beside the snapshots" in caplog.text


@pytest.mark.parametrize("spooled", [True, False])
def test_string_columns_keep_their_nulls_and_slices(tmp_path: Path, spooled: bool) -> None:
    # (A column an older store lacks reads as nulls; LanceDB may hand over sliced arrays.)
    import pyarrow as pa

    chunks = [
        pa.array(["a", None, "ccc", ""]),
        pa.nulls(3, pa.string()),
        pa.array(["x", "yy", None, "zzz", "w"]).slice(1, 3),
        pa.array(["ü" * 5]),
    ]
    spool = build._Bytes(tmp_path / "s.bytes" if spooled else None)
    sink = build._Strings(sum(len(c) for c in chunks), spool)
    for chunk in chunks:
        sink.add(chunk)
    column = sink.finish(pa.string())
    spool.close()
    expected = pa.concat_arrays(chunks)
    assert column.equals(pa.chunked_array([expected])) and column.null_count == 5
