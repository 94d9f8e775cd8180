"""A snapshot writer copies the rows of the snapshot it read from bytes it read and checked
block by block, never through that file's mapping: the file cut or changed in place
meanwhile is a damaged snapshot (rebuilt from the store), not a process killed by SIGBUS nor
a new snapshot holding the changed bytes under fresh checksums. That copy is the whole-file
check: the request that makes the write checks only the rows it reads."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from octobrain.models import Memory
from tests.test_snapshot_served import SCOPE, _brain, _hits, _store_with_snapshot, answered_in_child
from tests.test_snapshot_served import data_dir as data_dir  # (the autouse fixture)

_CHANGED_AS_WRITTEN = """
import sys
from pathlib import Path
from octobrain.memory.snapshot import SnapshotDir
from tests.test_snapshot_served import _brain, _hits

db, change, file, update, at = Path(sys.argv[1]), *sys.argv[2:]
writer = _brain(db)  # a long-lived process (the resident service) serving from the snapshot
_hits(writer, "setting zq2", record_access=False)
corpus = writer.retriever.corpus
assert corpus.reads_snapshot
path = corpus._source.where / file
fill = SnapshotDir._fill
done = []

def change():  # in place, as `truncate` or a copy over it does; once
    if done:
        return
    done.append(file)
    data = path.read_bytes()
    at = data.index(b"setting zq17") + len("setting z") if file == "rows.arrow" else 0
    at = at or len(data) * 3 // 4  # (a vector's or a posting's byte)
    with path.open("r+b") as f:
        if change == "cut":
            f.truncate(len(data) // 2)
        else:  # one byte: in rows.arrow, of a memory's text ("zq17" → "zQ17")
            f.seek(at)
            f.write(b"Q" if file == "rows.arrow" else bytes([data[at] ^ 0xFF]))

def change_then_fill(self, tmp, snap):  # taken for the writer, then changed in place
    change()
    return fill(self, tmp, snap)

class ChangedAsMerged:  # the index's Rust handle: its stored postings changed as it merges
    def __init__(self, handle):
        self.handle = handle

    def __getattr__(self, name):
        if name.startswith("to_parts"):
            change()
        return getattr(self.handle, name)

if at == "fill":
    SnapshotDir._fill = change_then_fill
if update == "add":
    writer.memorize("Fresh note", "The cache uses setting zqnew.")
else:  # only an access counted: the index, vectors and edges are the snapshot's still
    _hits(writer, "setting zq5")
    writer._access_queue().flush()
_hits(writer, "setting zq3", record_access=False)  # caught up: the mirror holds it
if at == "merge":  # (on the request path: the mirror taken for the writer)
    corpus.index._index = ChangedAsMerged(corpus.index._index)
corpus.save_snapshot()  # written now, waited for
SnapshotDir._fill = fill
hit = writer.remember("setting zq7", min_relevance=0.0, record_access=False).hits[0]
assert hit.memory.content == "The service uses setting zq7."
print("answered")
"""


def _write_while_changed(
    tmp_path: Path,
    change: str,
    file: str = "rows.arrow",
    update: str = "add",
    n: int = 30,
    at: str = "fill",
) -> list[str]:
    """A long-lived process (the resident service) that opened the snapshot writes it anew
    after `update` (a memory added, or an access counted), its `file` changed in place
    (`change`) just as the writer copies it (`at` "fill"), or as the index is merged for it
    ("merge"): exit 0 and "answered" asserted, the damage named and the snapshot dropped;
    the store's ids."""
    ids = _store_with_snapshot(tmp_path / "db", n)
    stderr = answered_in_child(tmp_path, _CHANGED_AS_WRITTEN, change, file, update, at)
    assert f"memory snapshot damaged ({file} fails its checksum at block" in stderr
    assert "; rebuilding from the store" in stderr
    return ids


def test_a_snapshot_cut_while_its_writer_copies_it_is_rebuilt_not_a_crash(tmp_path: Path) -> None:
    # Before: the writer's thread copied the old rows through their mapping, and the process
    # (the resident service) died of SIGBUS at the first page past the cut.
    _write_while_changed(tmp_path, "cut")
    # What it rebuilt from the store left a sound snapshot: the next process is served by it.
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zqnew", record_access=False)
    assert reader.retriever.corpus.opened_snapshot and not reader.store.connected


def test_a_snapshot_changed_while_its_writer_copies_it_is_not_copied(tmp_path: Path) -> None:
    # Before: the changed byte went into the new snapshot under fresh block checksums; the
    # writing process adopted it, and its next query's row check called the store damaged
    # ("Run `octobrain doctor`"), though only the snapshot had changed.
    ids = _write_while_changed(tmp_path, "flip")
    reader = _brain(tmp_path / "db")
    recall = reader.remember("setting zq17", min_relevance=0.0, record_access=False)
    assert recall.hits[0].memory.id == ids[17]
    assert recall.hits[0].memory.content == "The service uses setting zq17."


def test_a_damaged_block_no_read_took_is_found_by_the_writer_and_the_snapshot_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: taking the mirror for the writer read and checked all of `rows.arrow` on the
    # request path, under the mirror's lock (40-60 ms at 100k), though the writer checks every
    # block it copies; damage there was raised to the caller (the resident service leaving
    # its snapshot as it exits: "store not settled"). Now the writer names it, and drops the
    # snapshot: no process opens it again, and the next one rebuilds from the store.
    writer = _brain(tmp_path / "db")
    made = [
        Memory(title=f"Note {i}", content=f"zqmark{i:03d} " + "x" * 3000, scope=SCOPE)
        for i in range(80)
    ]
    writer.store.add(made, writer.embedder.embed_documents([m.content for m in made]))
    writer.remember("zqmark001", record_access=False)
    writer.retriever.corpus.wait_for_snapshot()
    process = _brain(tmp_path / "db")  # (a long-lived one: the resident service)
    corpus = process.retriever.corpus
    corpus.refresh()  # opened: no row read yet
    assert corpus.reads_snapshot and corpus._source is not None
    where = corpus._source.where
    rows = where / "rows.arrow"
    data = bytearray(rows.read_bytes())
    damaged = data.index(b"zqmark040") // (1 << 16)
    ids = {data.index(m.id.encode()) // (1 << 16) for m in (made[0], made[-1])}
    assert damaged not in ids  # (the id column, which the write's request reads, is sound)
    data[data.index(b"zqmark040") + 100] ^= 0xFF
    before = rows.stat()
    rows.write_bytes(bytes(data))
    os.utime(rows, ns=(before.st_atime_ns, before.st_mtime_ns))  # (rot: its time unchanged)
    added = Memory(title="Fresh", content="The cache uses setting zqnew.", scope=SCOPE)
    process.store.add([added], process.embedder.embed_documents([added.content]))
    corpus.refresh()
    with caplog.at_level(logging.WARNING):
        corpus.save_snapshot()  # (the resident service, as it exits)
    assert f"rows.arrow fails its checksum at block {damaged}" in caplog.text
    assert not where.exists()
    reader = _brain(tmp_path / "db")
    recall = reader.remember("zqmark040", min_relevance=0.0, record_access=False)
    assert recall.hits[0].memory.id == made[40].id
    assert recall.hits[0].memory.content == made[40].content  # the store's, not the flipped
    assert _hits(reader, "setting zqnew", record_access=False)[0] == added.id


@pytest.mark.parametrize(
    ("file", "update", "n"),
    [
        ("vectors.npy", "add", 30),  # the older rows' vectors, before the one added
        ("vectors.npy", "add", 600),  # (past two blocks: copied in the kernel)
        ("vectors.npy", "access", 30),  # the vectors unchanged: the file kept whole
        ("bm25.docs.npy", "access", 30),  # the postings unchanged: the file kept whole
    ],
)
@pytest.mark.parametrize("change", ["cut", "flip"])
def test_a_large_file_changed_while_its_writer_copies_it_is_named_not_written(
    tmp_path: Path, change: str, file: str, update: str, n: int
) -> None:
    # Before, a cut: the writer wrote from the file's mapping, and the kernel refused the
    # pages past the cut ("memory snapshot not written: [Errno 14] Bad address", "1800
    # requested and 992 written", as a full cache: the cut snapshot left as it was); a byte
    # changed: it went into the new snapshot under fresh checksums (a memory's vector, or a
    # term's postings, silently other than the store's).
    ids = _write_while_changed(tmp_path, change, file, update, n)
    reader = _brain(tmp_path / "db")
    recall = reader.remember("setting zq17", min_relevance=0.0, record_access=False)
    assert recall.hits[0].memory.id == ids[17]


def test_edges_cut_while_the_writer_copies_them_are_written_whole(tmp_path: Path) -> None:
    # Before: the writer wrote the edges from edges.arrow's mapping, and the process (the
    # resident service) died of SIGBUS at the first page past the cut. The edges are read
    # whole as the snapshot opens (the bytes their checksum was taken over), never mapped.
    ids = _store_with_snapshot(tmp_path / "db")
    brain = _brain(tmp_path / "db")
    for i in range(0, 20, 2):
        brain.relate(ids[i], ids[i + 1])
    brain.remember("setting", record_access=False)
    brain.retriever.corpus.save_snapshot()
    answered_in_child(tmp_path, _CHANGED_AS_WRITTEN, "cut", "edges.arrow", "add", "fill")
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zqnew", record_access=False)
    assert reader.retriever.corpus.opened_snapshot
    snap = reader._snapshots().load()
    assert snap is not None and snap.edges is not None and snap.edges.num_rows == 10


@pytest.mark.parametrize(
    ("file", "n"),
    [
        pytest.param("bm25.docs.npy", 600, id="postings-past-a-page"),
        pytest.param("bm25.tfs.npy", 30, id="frequencies"),
    ],
)
@pytest.mark.parametrize("change", ["cut", "flip"])
def test_postings_changed_as_a_changed_index_is_merged_are_named_not_merged(
    tmp_path: Path, change: str, file: str, n: int
) -> None:
    # Before: the index, changed since the snapshot (a memory added), was merged for the
    # writer on the request path straight from the postings' mapping, after a check that
    # read them: cut in between, the process (the resident service) died of SIGBUS, or the
    # zeros past the cut (a byte changed) went into the new snapshot under fresh checksums.
    # Now the merge reads the files, each block verified as it is used.
    ids = _write_while_changed(tmp_path, change, file, "add", n, at="merge")
    reader = _brain(tmp_path / "db")
    recall = reader.remember("setting zq17", min_relevance=0.0, record_access=False)
    assert recall.hits[0].memory.id == ids[17]
    assert _hits(reader, "setting zqnew", record_access=False)


@pytest.mark.parametrize(
    "file", ["edit_key.npy", "created.npy", "scope.npy", "bm25.offsets.npy", "bm25.terms.npy"]
)
@pytest.mark.parametrize("change", ["cut", "flip"])
def test_a_small_file_changed_after_its_check_is_written_as_checked(
    tmp_path: Path, change: str, file: str
) -> None:
    # Before: the small files (filter columns, ids, the index's terms and offsets) were
    # checked whole as the snapshot opened, then mapped, and written from the mapping: cut
    # or changed in place meanwhile, the write failed as a full cache would ("[Errno 14]
    # Bad address"), or wrote the zeros past the cut, or the changed byte, into the new
    # snapshot under fresh checksums. Now they are used as the bytes that were checked.
    _store_with_snapshot(tmp_path / "db", 600)
    opened = _brain(tmp_path / "db")._snapshots().load()
    assert opened is not None and opened.where is not None
    checked = (opened.where / file).read_bytes()
    answered_in_child(tmp_path, _CHANGED_AS_WRITTEN, change, file, "access", "fill")
    written = _brain(tmp_path / "db")._snapshots().load()
    assert written is not None and written.where not in (None, opened.where)
    assert (written.where / file).read_bytes() == checked


def test_a_snapshot_replaced_before_its_changed_index_is_merged_is_not_called_damaged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the merge opened bm25.docs.npy by its path, which another process's newer
    # snapshot had removed with the rest of the old one's directory: a healthy store was
    # 'memory snapshot damaged (bm25.docs.npy: No such file or directory (os error 2));
    # rebuilding from the store', the resident service's mirror rebuilt. Now the merge reads
    # the file the snapshot opened (and checks), as its queries and its writer's copy do.
    ids = _store_with_snapshot(tmp_path / "db")
    process = _brain(tmp_path / "db")  # (a long-lived one: the resident service)
    corpus = process.retriever.corpus
    _hits(process, "setting zq2", record_access=False)
    assert corpus.reads_snapshot and corpus._source is not None
    process.memorize("Fresh note", "The cache uses setting zqnew.")  # the index changed
    _hits(process, "setting zq3", record_access=False)
    corpus.wait_for_snapshot()  # (its tail left beside the snapshot)
    opened = corpus._source.where
    shutil.rmtree(opened)  # (as another process's newer snapshot left it)
    with caplog.at_level(logging.WARNING):
        corpus.save_snapshot()
    assert "damaged" not in caplog.text
    reader = _brain(tmp_path / "db")
    written = reader._snapshots().load()  # this process's, merged from what it opened
    assert written is not None and written.where not in (None, opened)
    assert written.version == corpus._version
    assert _hits(reader, "setting zq17", record_access=False)[0] == ids[17]
    assert _hits(reader, "setting zqnew", record_access=False)
