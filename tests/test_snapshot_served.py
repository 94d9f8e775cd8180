"""A new process whose store a current snapshot mirrors is served by it without opening LanceDB,
and still answers as the store would: every access it counts shows in the next process and is
committed once, and a store that changed, lost a commit or is mid-restore is never served from
the snapshot."""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.errors import StorageError
from octobrain.memory import tail
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from octobrain.store import accessed, manifest, operations, versions
from tests.reliability.test_deletion_files import flip_offset

SCOPE = "github.com/acme/api"


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _brain(uri: Path) -> Brain:
    """A brain as a new process opens it (its own store handle, nothing connected yet)."""
    config = Config(search=SearchConfig(snapshot_min_rows=1))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)


def _store_with_snapshot(uri: Path, n: int = 30) -> list[str]:
    """`n` memories and a snapshot of the store as they left it."""
    brain = _brain(uri)
    memories = [
        Memory(title=f"Note {i}", content=f"The service uses setting zq{i}.", scope=SCOPE)
        for i in range(n)
    ]
    brain.store.add(memories, brain.embedder.embed_documents([m.content for m in memories]))
    brain.remember("setting", record_access=False)
    brain.retriever.corpus.wait_for_snapshot()
    return [m.id for m in memories]


def _exit_flush(brain: Brain) -> None:
    """What the brain's process does with its queued access counts as it exits."""
    brain._access_queue().flush(keep=True)


def _hits(brain: Brain, query: str, **kw: Any) -> list[str]:
    return [h.memory.id for h in brain.remember(query, min_relevance=0.0, **kw).hits]


def test_a_current_snapshot_serves_a_new_process_without_opening_the_store(tmp_path: Path) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zq7", record_access=False)[0] == ids[7]
    assert reader.retriever.corpus.opened_snapshot
    assert not reader.store.connected


def test_an_access_counted_from_the_snapshot_shows_next_and_is_committed_once(
    tmp_path: Path,
) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    version = _brain(tmp_path / "db").store.version()
    first = _brain(tmp_path / "db")
    assert _hits(first, "setting zq7", limit=1) == [ids[7]]
    _exit_flush(first)
    assert not first.store.connected  # kept for the next process, not committed now
    # The next process, served by the snapshot as well, ranks with the access counted…
    second = _brain(tmp_path / "db")
    assert _hits(second, "setting zq7", limit=1, record_access=False) == [ids[7]]
    corpus = second.retriever.corpus
    assert corpus.memory(corpus.pos_of.get(ids[7], -1)).access_count == 1
    # …and asking again within the window counts nothing more.
    assert _hits(second, "setting zq7", limit=1) == [ids[7]]
    _exit_flush(second)
    # The first process that opens the tables commits what was kept, once, before it reads.
    got = _brain(tmp_path / "db").get(ids[7])
    assert got.access_count == 1 and got.last_accessed > got.created_at
    store = _brain(tmp_path / "db").store
    assert store.version() == version + 1
    assert store.kept_access() is None
    assert _brain(tmp_path / "db").get(ids[7]).access_count == 1


def test_kept_accesses_are_claimed_by_one_process_only(tmp_path: Path) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    reader = _brain(tmp_path / "db")
    _hits(reader, "setting zq3", limit=1)
    _exit_flush(reader)
    location = _brain(tmp_path / "db").store.location
    taken = accessed.claim(location)
    assert len(taken) == 1
    assert accessed.claim(location) == []  # a second process finds nothing left to count
    accessed.unclaim(taken)  # (the first could not commit: put back)
    assert _brain(tmp_path / "db").get(ids[3]).access_count == 1


def test_an_access_another_opener_is_committing_shows_in_the_ranking_meanwhile(
    tmp_path: Path,
) -> None:
    # A process opening the tables while another (or its own sleep check) had claimed the
    # kept file and not yet committed it read the store without the access: the ranking
    # forgot what the process before had counted (a flaky `memory remember` in the tests).
    ids = _store_with_snapshot(tmp_path / "db")
    reader = _brain(tmp_path / "db")
    _hits(reader, "setting zq3", limit=1)
    _exit_flush(reader)
    shutil.rmtree(tmp_path / "data" / "cache" / "snapshots")  # read through LanceDB
    location = _brain(tmp_path / "db").store.location
    claimed = accessed.claim(location)  # another opener, counting it now
    assert len(claimed) == 1
    later = _brain(tmp_path / "db")
    assert _hits(later, "setting zq3", limit=1, record_access=False) == [ids[3]]
    corpus = later.retriever.corpus
    assert not corpus.opened_snapshot and later.store.connected
    assert corpus.memory(corpus.pos_of.get(ids[3], -1)).access_count == 1
    accessed.unclaim(claimed)  # (its commit failed: the next opener counts it, once)
    assert _brain(tmp_path / "db").get(ids[3]).access_count == 1


def test_a_write_since_the_snapshot_is_read_from_the_store(tmp_path: Path) -> None:
    _store_with_snapshot(tmp_path / "db")
    added, _ = _brain(tmp_path / "db").memorize("Fresh note", "The cache uses setting zqnew.")
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zqnew", limit=1, record_access=False) == [added.id]
    assert reader.store.connected


def test_a_lost_newest_commit_is_reported_not_served_from_the_snapshot(tmp_path: Path) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    writer = _brain(tmp_path / "db")
    writer.update(ids[2], content="The service uses setting zqlost.")
    newest = versions.version_manifest(writer.store.location, "memories", writer.store.version())
    assert newest is not None
    newest.unlink()  # the snapshot is now of the newest manifest left, but a commit is lost
    with pytest.raises(StorageError, match="gone"):
        _hits(_brain(tmp_path / "db"), "setting zq2", record_access=False)


@pytest.mark.parametrize("damage", ["cut", "gone", "cut, after a write since"])
def test_a_damaged_data_file_is_reported_not_hidden_by_the_snapshot(
    tmp_path: Path, damage: str
) -> None:
    # The snapshot holds every row, so `remember` (and `brief`, the session hooks) answered
    # from it as if nothing were wrong, while `stats` and every write said the store was
    # damaged: the user learnt of it only when a write failed.
    _store_with_snapshot(tmp_path / "db")
    [data] = sorted((tmp_path / "db" / "memories.lance" / "data").glob("*.lance"))
    if damage.endswith("since"):  # (the next process replays the tail left beside it)
        _brain(tmp_path / "db").memorize("Fresh note", "The cache uses setting zqnew.")
    if damage.startswith("cut"):
        data.write_bytes(b"")
    else:
        data.unlink()
    reader = _brain(tmp_path / "db")
    with pytest.raises(StorageError, match=rf"table 'memories' .*\(data file {data.name}"):
        _hits(reader, "setting zq2", record_access=False)
    assert not reader.store.connected  # told from the files, LanceDB not imported for it


def _served_by_a_tail(uri: Path, *, forget: str | None = None) -> Memory:
    """A write since the snapshot (and `forget` forgotten: a deletion file), then the first
    process after it, which catches up through LanceDB and leaves a tail beside the snapshot
    (what the next processes replay); the memory written."""
    writer = _brain(uri)
    added, _ = writer.memorize("Fresh note", "The cache uses setting zqnew.")
    if forget is not None:
        writer.forget([forget], confirm=True)
    first = _brain(uri)
    assert _hits(first, "setting zqnew", limit=1, record_access=False) == [added.id]
    first.retriever.corpus.wait_for_snapshot()
    assert list((uri.parent / "data" / "cache" / "snapshots").glob("*/v*/tail-*.bin"))
    return added


def _newest_files(uri: Path) -> set[Path]:
    """The data files the newest memories version reads."""
    store = _brain(uri).store
    files = operations.data_files(store.location, "memories", store.version())
    assert files
    return {uri / "memories.lance" / "data" / path for path, _ in files}


@pytest.mark.parametrize("damage", ["gone", "cut"])
def test_a_data_file_damaged_after_a_tail_is_reported_not_replayed_over(
    tmp_path: Path, damage: str
) -> None:
    # The tail's versions read files the snapshot's record does not name (the write added
    # one, an access count rewrote the rest), and a file gone counted only while the
    # snapshot's own versions were the newest: `remember` answered from snapshot and tail.
    uri = tmp_path / "db"
    _store_with_snapshot(uri)
    before = set((uri / "memories.lance" / "data").glob("*.lance"))
    _served_by_a_tail(uri)
    [data] = sorted(_newest_files(uri) - before)
    if damage == "cut":
        data.write_bytes(b"")
    else:
        data.unlink()
    reader = _brain(uri)
    with pytest.raises(StorageError, match=rf"table 'memories' .*\(data file {data.name}"):
        _hits(reader, "setting zq2", record_access=False)
    assert not reader.store.connected  # told from the tail's record, LanceDB not imported


def test_a_deletion_file_gone_after_a_tail_is_reported(tmp_path: Path) -> None:
    # A forget leaves a deletion file (`_deletions/…`) that every read of the table needs:
    # gone, `stats` failed on it while `remember` answered from the snapshot and its tail.
    uri = tmp_path / "db"
    ids = _store_with_snapshot(uri)
    _served_by_a_tail(uri, forget=ids[4])
    [deletion] = (uri / "memories.lance" / "_deletions").iterdir()
    deletion.unlink()
    reader = _brain(uri)
    with pytest.raises(
        StorageError,
        match=rf"table 'memories' .*\(deletion file _deletions/{deletion.name} is gone",
    ):
        _hits(reader, "setting zq2", record_access=False)
    assert not reader.store.connected


def test_a_deletion_file_changed_after_a_tail_is_reported(tmp_path: Path) -> None:
    # Its time changed, the snapshot was set aside and the store read: a bit flipped in an
    # offset showed the forgotten memory again, and hid another, without a word.
    uri = tmp_path / "db"
    ids = _store_with_snapshot(uri)
    _served_by_a_tail(uri, forget=ids[4])
    [deletion] = (uri / "memories.lance" / "_deletions").iterdir()
    flip_offset(deletion, keep_times=False)
    reader = _brain(uri)
    with pytest.raises(
        StorageError,
        match=rf"table 'memories' .*\(deletion file _deletions/{deletion.name} is not as it was",
    ):
        _hits(reader, "setting zq4", record_access=False)


def _left_tail(tmp_path: Path) -> tuple[Path, dict[str, Any], bytes]:
    """The tail left beside the snapshot: its path, its header and what follows the header."""
    [left] = (tmp_path / "data" / "cache" / "snapshots").glob("*/v*/tail-*.bin")
    data = left.read_bytes()
    start = len(tail.MAGIC) + 12
    (size,) = struct.unpack_from("<Q", data, len(tail.MAGIC))
    return left, json.loads(data[start : start + size]), data[start + size :]


def test_a_tail_an_older_octobrain_left_is_not_replayed(tmp_path: Path) -> None:
    # Its header has no checksum (and, older still, names no data files): what it would
    # serve cannot be checked, so the store is read, and a tail of this octobrain's is left
    # for the next process.
    uri = tmp_path / "db"
    _store_with_snapshot(uri)
    added = _served_by_a_tail(uri)
    left, header, body = _left_tail(tmp_path)
    head = json.dumps(header).encode()
    left.write_bytes(b"OBTAIL1\n" + struct.pack("<Q", len(head)) + head + body)
    reader = _brain(uri)
    assert _hits(reader, "setting zqnew", limit=1, record_access=False) == [added.id]
    assert reader.store.connected
    reader.retriever.corpus.wait_for_snapshot()
    again = _brain(uri)
    assert _hits(again, "setting zqnew", limit=1, record_access=False) == [added.id]
    assert not again.store.connected


def test_a_tail_whose_header_changed_on_disk_is_not_replayed(tmp_path: Path) -> None:
    # The header's arrays are positions in the mirror: one digit of the forgotten memory's
    # position changed on disk (the body's checksum still held) and the replay dropped
    # another memory, served the forgotten one again, and said nothing.
    uri = tmp_path / "db"
    ids = _store_with_snapshot(uri)
    _served_by_a_tail(uri, forget=ids[4])
    left, header, _ = _left_tail(tmp_path)
    [step] = [s for s in header["steps"] if s["gone"]]
    assert step["gone"] == [4]
    data = left.read_bytes()
    at = data.index(b'"gone": [4]') + len(b'"gone": [')
    left.write_bytes(data[:at] + b"7" + data[at + 1 :])  # [4] → [7], the length unchanged
    reader = _brain(uri)
    hits = _hits(reader, "setting zq7 zq4", record_access=False)
    assert ids[7] in hits and ids[4] not in hits
    assert reader.store.connected  # caught up from the store, the tail not trusted


_CUT_WHILE_MAPPED = """
import sys
from pathlib import Path
from tests.test_snapshot_served import _brain, _hits

db = Path(sys.argv[1])
reader = _brain(db)  # a long-lived process (the resident service) serving from the snapshot
first = _hits(reader, "setting zq2", record_access=False)
assert reader.retriever.corpus.reads_snapshot
for path in reader.retriever.corpus._source.where.iterdir():
    if path.suffix in (".arrow", ".npy"):
        with path.open("r+b") as f:  # in place, as `truncate` or a copy over it does
            f.truncate(0)
assert _hits(reader, "setting zq2", record_access=False) == first
print("answered")
"""


def answered_in_child(tmp_path: Path, script: str, *args: str) -> str:
    """The stderr of `script` run in a process of its own on the store at `tmp_path / "db"`
    (its first argument, then `args`), which must exit 0 having printed "answered"."""
    done = subprocess.run(
        # (faulthandler: a child killed by a signal leaves every thread's stack in stderr)
        [sys.executable, "-X", "faulthandler", "-c", script, str(tmp_path / "db"), *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent.parent,
        env={**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "answered\n"), done.stderr
    return done.stderr


def test_a_snapshot_file_cut_while_mapped_is_dropped_not_a_crash(tmp_path: Path) -> None:
    # The resident service maps the snapshot's files: one truncated in place (a backup copied
    # over the cache) killed it with SIGBUS on its next read, and it logged nothing.
    _store_with_snapshot(tmp_path / "db")
    stderr = answered_in_child(tmp_path, _CUT_WHILE_MAPPED)
    assert "changed while in use; rebuilding" in stderr


def test_a_store_mid_restore_is_refused_though_its_snapshot_is_current(tmp_path: Path) -> None:
    _store_with_snapshot(tmp_path / "db")
    manifest.mark_restore(_brain(tmp_path / "db").store.location, 3)
    with pytest.raises(StorageError, match="restore 3` was cut short"):
        _hits(_brain(tmp_path / "db"), "setting zq2", record_access=False)


def _answers(brain: Brain) -> dict[tuple[str, int], tuple[list[str], list[str]]]:
    """Each query's results and the neighbours shown with them."""
    out = {}
    for query in ("setting zqnew", "setting zqedited", "setting zq3", "setting zq1", "setting"):
        for limit in (1, 8):
            recall = brain.remember(query, min_relevance=0.0, record_access=False, limit=limit)
            shown = [n.memory.id for n in recall.neighbours]
            out[query, limit] = ([h.memory.id for h in recall.hits], shown)
    return out


def test_after_a_write_the_next_processes_catch_up_by_the_tail_left_beside_the_snapshot(
    tmp_path: Path,
) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    writer = _brain(tmp_path / "db")
    added, _ = writer.memorize("Fresh note", "The cache uses setting zqnew.")
    writer.update(ids[5], content="The service now uses setting zqedited.")
    writer.forget([ids[3]], confirm=True)
    writer.relate(ids[1], ids[2])
    # The first process after the writes reads what changed through LanceDB, as before…
    first = _brain(tmp_path / "db")
    expected = _answers(first)
    assert first.store.connected
    first.retriever.corpus.wait_for_snapshot()  # (what it leaves, written as it exits)
    assert expected["setting zqnew", 1][0] == [added.id]
    assert expected["setting zqedited", 1][0] == [ids[5]]
    assert ids[3] not in expected["setting zq3", 8][0]
    assert expected["setting zq1", 1] == ([ids[1]], [ids[2]])  # the new edge's neighbour
    # …and leaves it beside the snapshot: the next one replays it without opening the store,
    # into the same mirror.
    second = _brain(tmp_path / "db")
    assert _hits(second, "setting zqnew", limit=1, record_access=False) == [added.id]
    assert not second.store.connected
    assert _answers(second) == expected
    assert len(second.retriever.corpus) == len(first.retriever.corpus)


def test_a_damaged_tail_is_not_replayed_and_the_store_answers(tmp_path: Path) -> None:
    _store_with_snapshot(tmp_path / "db")
    added, _ = _brain(tmp_path / "db").memorize("Fresh note", "The cache uses setting zqnew.")
    first = _brain(tmp_path / "db")
    assert _hits(first, "setting zqnew", limit=1, record_access=False) == [added.id]
    first.retriever.corpus.wait_for_snapshot()
    left = list((tmp_path / "data" / "cache" / "snapshots").glob("*/v*/tail-*.bin"))
    assert len(left) == 1
    data = bytearray(left[0].read_bytes())
    data[-40] ^= 0x10  # a bit flipped in the rows it holds
    left[0].write_bytes(bytes(data))
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zqnew", limit=1, record_access=False) == [added.id]
    assert reader.store.connected  # read from the store, not from the tail
    assert not left[0].exists() or left[0].read_bytes() != bytes(data)


def test_kept_accesses_are_bounded_and_what_a_dead_writer_left_is_dropped(tmp_path: Path) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    location = _brain(tmp_path / "db").store.location
    now, window = datetime.now(UTC), timedelta(minutes=10)
    for i in range(accessed.MAX_FILES):
        assert accessed.write(location, [ids[i % 5]], now, window)
    assert not accessed.write(location, [ids[9]], now, window)  # full: the caller commits
    folder = tmp_path / "db" / "_octobrain" / accessed.FOLDER
    half = folder / ".1-2-3.json.tmp"  # a writer killed mid-write
    half.write_text("{", encoding="utf-8")
    os.utime(half, (0, 0))
    # A process exiting with accesses queued commits them itself then, and the kept ones too.
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zq7", limit=1) == [ids[7]]
    _exit_flush(reader)
    assert sorted(p.name for p in folder.iterdir()) == []
    store = _brain(tmp_path / "db")
    assert [store.get(mid).access_count for mid in (ids[0], ids[4], ids[7], ids[9])] == [1, 1, 1, 0]


def test_a_file_in_place_of_the_kept_accesses_folder_leaves_searches_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: every `remember` ended in a NotADirectoryError traceback (the folder is read
    # before a search, to show the accesses other processes kept).
    ids = _store_with_snapshot(tmp_path / "db")
    folder = tmp_path / "db" / "_octobrain" / accessed.FOLDER
    if folder.exists():
        shutil.rmtree(folder)
    folder.write_text("x", encoding="utf-8")
    reader = _brain(tmp_path / "db")
    with caplog.at_level(logging.WARNING):
        assert _hits(reader, "setting zq7", limit=1) == [ids[7]]
        _exit_flush(reader)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "is not a folder: move it aside to keep access counts" in said, said


def test_a_folder_among_the_kept_accesses_is_left_alone(tmp_path: Path) -> None:
    # Before: a folder there was read as a damaged record and "removed" (unlink): every
    # `remember` and `memorize` that counted the kept accesses ended in IsADirectoryError.
    ids = _store_with_snapshot(tmp_path / "db")
    location = _brain(tmp_path / "db").store.location
    now, window = datetime.now(UTC), timedelta(minutes=10)
    assert accessed.write(location, [ids[3]], now, window)
    folder = tmp_path / "db" / "_octobrain" / accessed.FOLDER
    (folder / "1-2-3.json").mkdir()
    reader = _brain(tmp_path / "db")
    assert _hits(reader, "setting zq7", limit=1, record_access=False) == [ids[7]]
    writer = _brain(tmp_path / "db")  # opens the tables: counts what was kept
    assert writer.memorize("A later note", "Written while the folder is still there.")[0].id
    assert sorted(p.name for p in folder.iterdir()) == ["1-2-3.json"]
    assert _brain(tmp_path / "db").get(ids[3]).access_count == 1
