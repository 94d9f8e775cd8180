"""The mirror catches up from the commits since its version by reading what changed (the
fragments written since, the store's change record), proves it by the row count, and reads
every row when it cannot: every acknowledged write of any process is seen by the next call."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from octobrain.memory.brain import Brain
from octobrain.memory.corpus import Corpus
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.store import seen
from octobrain.times import utcnow
from tests.snapshot_support import SCOPE, _brain
from tests.snapshot_support import data_dir as data_dir  # the autouse data directory, shared


def _fill(brain: Brain, n: int = 30) -> list[str]:
    memories = [
        Memory(
            title=f"Note {i}",
            content=f"The service uses setting zq{i} = {i * 7}.",
            scope=SCOPE,
        )
        for i in range(n)
    ]
    vectors = brain.embedder.embed_documents([m.searchable_text() for m in memories])
    brain.store.add(memories, vectors)
    return [m.id for m in memories]


def _mirror(brain: Brain) -> Corpus:
    corpus = brain.retriever.corpus
    corpus.refresh()
    corpus.wait_for_snapshot()
    return corpus


def _found(brain: Brain, query: str) -> list[str]:
    hits = brain.remember(query, min_relevance=0.0, record_access=False).hits
    brain.retriever.corpus.wait_for_snapshot()
    return [h.memory.id for h in hits]


OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from datetime import timedelta
    from octobrain.config import Config, SearchConfig
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain
    from octobrain.times import utcnow

    uri, scope, action, arg = sys.argv[1:5]
    config = Config(search=SearchConfig(snapshot_min_rows=0))
    brain = Brain(scope, config=config, embedder=get_embedder("hash:64"), uri=uri)
    if action == "memorize":
        memory, _ = brain.memorize("Fresh zqfresh", "A fresh zqfresh fact from elsewhere.")
        print(memory.id)
    elif action == "update":
        brain.update(arg, content="The service now uses setting zqupdated instead.")
    elif action == "forget":
        brain.forget([arg], confirm=True)
    elif action == "access":
        brain.store.record_access([arg], utcnow(), min_interval=timedelta(0))
    elif action == "kill-before-delete":
        import os, signal
        table = type(brain.store.memories)
        def die(self, where):
            os.kill(os.getpid(), signal.SIGKILL)  # the change is noted; the commit never lands
        table.delete = die
        brain.forget([arg], confirm=True)
    """
)


def _other(uri: Path, action: str, arg: str = "", *, killed: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(uri), SCOPE, action, arg],
        capture_output=True,
        timeout=120,
    )
    expected = -signal.SIGKILL if killed else 0
    assert done.returncode == expected, done.stderr.decode()
    return done.stdout.decode().strip()


def test_other_processes_writes_are_seen_from_the_changes_alone(tmp_path: Path) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(reader)
    corpus = _mirror(reader)
    assert corpus.last_catch_up == "every row"  # (the first load)

    fresh = _other(tmp_path / "db", "memorize")
    assert _found(reader, "zqfresh")[0] == fresh
    assert corpus.last_catch_up == "changes"

    _other(tmp_path / "db", "update", ids[3])
    assert _found(reader, "zqupdated")[0] == ids[3]
    assert "zqupdated" in corpus.memory(corpus.pos_of[ids[3]]).content
    assert corpus.last_catch_up == "changes"

    _other(tmp_path / "db", "access", ids[5])
    corpus.refresh()
    assert corpus.memory(corpus.pos_of[ids[5]]).access_count == 1
    assert corpus.last_catch_up == "changes"

    _other(tmp_path / "db", "forget", ids[7])
    assert ids[7] not in _found(reader, "zq7")
    assert ids[7] not in corpus.pos_of
    assert corpus.last_catch_up == "changes"
    assert len(corpus) == len(ids)  # 30 + fresh - forgotten
    # The mirror now holds what a new process reading the store from scratch holds.
    fresh_reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    again = _mirror(fresh_reader)
    assert sorted(again.pos_of) == sorted(corpus.pos_of)


def test_a_new_process_catches_up_from_the_snapshot_by_the_changes(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    _mirror(first)  # writes the snapshot
    fresh = _other(tmp_path / "db", "memorize")
    _other(tmp_path / "db", "forget", ids[2])
    reader = _brain(tmp_path / "db")
    assert _found(reader, "zqfresh")[0] == fresh
    corpus = reader.retriever.corpus
    assert corpus.opened_snapshot and corpus.last_catch_up == "changes"
    assert ids[2] not in corpus.pos_of


def test_a_restore_from_history_reads_every_row(tmp_path: Path) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(reader)
    before = reader.store.version()
    corpus = _mirror(reader)
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    writer.update(ids[4], content="The service now uses setting zqlater.")
    writer.forget([ids[6]], confirm=True)
    assert _found(reader, "zqlater")[0] == ids[4]
    # Back to before the update and the forget: the restored rows come back at their old
    # row addresses, which no "new fragment" read would find.
    writer.restore(before, confirm=True)
    assert ids[6] in _found(reader, "zq6")
    assert corpus.last_catch_up == "every row"
    assert "zqlater" not in corpus.memory(corpus.pos_of[ids[4]]).content
    assert len(corpus) == len(ids)
    # And afterwards the changes alone are enough again.
    fresh = _other(tmp_path / "db", "memorize")
    assert _found(reader, "zqfresh")[0] == fresh
    assert corpus.last_catch_up == "changes"


def test_compaction_moves_every_row_and_the_mirror_follows(tmp_path: Path) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = [i for _ in range(4) for i in _fill(reader, 10)]  # four fragments
    corpus = _mirror(reader)
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    writer.forget([ids[1]], confirm=True)
    writer.store.compact()  # rewrites every row into a new fragment
    assert ids[1] not in _found(reader, "zq1")
    assert len(corpus) == len(ids) - 1
    _other(tmp_path / "db", "update", ids[12])
    assert _found(reader, "zqupdated")[0] == ids[12]
    assert corpus.last_catch_up == "changes"


def test_a_delete_the_record_does_not_know_is_found_by_reading_every_row(
    tmp_path: Path,
) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(reader)
    corpus = _mirror(reader)
    # Behind octobrain's back: no note, so the changed fragments cannot explain the count.
    reader.store.memories.delete(f"id = '{ids[9]}'")
    assert ids[9] not in _found(reader, "zq9")
    assert corpus.last_catch_up == "every row"
    assert ids[9] not in corpus.pos_of


# Of the right format but damaged in shape, or nested too deeply: an internal error
# (AttributeError, RecursionError) for every call that caught up, and for the other
# process's update, which notes its change in the record.
@pytest.mark.parametrize(
    "record",
    [
        "{not json",
        json.dumps({"format": 99}),
        json.dumps({"format": 1, "floor": [], "entries": {}}),
        json.dumps({"format": 1, "floor": {"memories": "x"}, "entries": []}),
        json.dumps({"format": 1, "floor": {}, "entries": [{"memories": 1e400, "ids": "abc"}]}),
        json.dumps({"format": 1, "floor": {}, "entries": [None]}),
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["syntax", "format", "lists", "text", "float", "null", "deep"],
)
def test_an_unreadable_change_record_means_reading_every_row(tmp_path: Path, record: str) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(reader)
    corpus = _mirror(reader)
    (tmp_path / "db" / "_octobrain").mkdir(exist_ok=True)
    (tmp_path / "db" / "_octobrain" / "changes.json").write_text(record)
    _other(tmp_path / "db", "update", ids[0])
    assert _found(reader, "zqupdated")[0] == ids[0]
    assert corpus.last_catch_up == "every row"


def test_a_forget_killed_after_its_note_loses_nothing(tmp_path: Path) -> None:
    reader = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(reader)
    corpus = _mirror(reader)
    _other(tmp_path / "db", "kill-before-delete", ids[8], killed=True)
    record = json.loads((tmp_path / "db" / "_octobrain" / "changes.json").read_text())
    assert ids[8] in record["entries"][-1]["ids"]  # noted, never committed
    fresh = _other(tmp_path / "db", "memorize")  # the lock died with the killed process
    assert _found(reader, "zqfresh")[0] == fresh
    assert corpus.last_catch_up == "changes"
    assert ids[8] in corpus.pos_of and _found(reader, "zq8")[0] == ids[8]
    # The next forget of it is still seen.
    _other(tmp_path / "db", "forget", ids[8])
    assert ids[8] not in _found(reader, "zq8")


def test_edges_follow_adds_and_forgets_and_live_in_the_snapshot(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    corpus = _mirror(first)
    writer = _brain(tmp_path / "db", snapshot_min_rows=0)
    links = [
        Relationship(ids[0], ids[1], RelationshipType.DEPENDS_ON, scope=SCOPE),
        Relationship(ids[2], ids[3], RelationshipType.RELATED_TO, scope=SCOPE),
    ]
    writer.store.add_relationships(links)
    corpus.refresh()
    assert {r.id for r in corpus.edges([ids[1], ids[2]])} == {links[0].id, links[1].id}
    assert corpus._edges.last_catch_up == "changes"
    writer.forget([ids[3]], confirm=True)  # takes its edge with it
    corpus.refresh()
    assert [r.id for r in corpus.edges([ids[0], ids[2]])] == [links[0].id]
    assert corpus._edges.last_catch_up == "changes"

    # A new process opens the snapshot (written before the links) and reads only the edges
    # added and removed since, never the whole relationships table (when the processes
    # before it left no tail beside it: `test_snapshot_served` replays one).
    corpus.wait_for_snapshot()
    for left in (tmp_path / "data").glob("cache/snapshots/*/v*/tail-*.bin"):
        left.unlink()
    reader = _brain(tmp_path / "db")
    assert [r.id for r in _mirror(reader).edges([ids[1]])] == [links[0].id]
    assert reader.retriever.corpus.opened_snapshot
    assert reader.retriever.corpus._edges.last_catch_up == "changes"
    assert reader.retriever.corpus.edges([ids[2], ids[3]]) == []


def test_own_access_bumps_stay_exact(tmp_path: Path) -> None:
    brain = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(brain)
    corpus = _mirror(brain)
    for _ in range(3):
        brain.store.record_access([ids[1]], utcnow(), min_interval=timedelta(0))
        corpus.refresh()
    assert corpus.memory(corpus.pos_of[ids[1]]).access_count == 3
    assert corpus.last_catch_up == "changes"


def test_a_store_re_created_under_the_same_path_is_never_served_from_the_old_mirror(
    tmp_path: Path,
) -> None:
    import shutil

    old = _brain(tmp_path / "db")
    for _ in range(4):
        _fill(old, 5)
    _mirror(old)  # its snapshot: 20 rows in four fragments
    version = old.store.version()
    shutil.rmtree(tmp_path / "db")
    seen.forget(str(tmp_path / "db"))  # started over on purpose (else refused)
    new = _brain(tmp_path / "db", snapshot_min_rows=0)
    ids = _fill(new, 20)  # as many rows, in fragment 0 only: no "new fragment" shows them
    from lancedb.index import BTree

    while new.store.version() <= version:  # commits that write no rows
        new.store.memories.create_index("title", config=BTree(), replace=True)
    reader = _brain(tmp_path / "db")
    corpus = _mirror(reader)
    # Its version of that number names other files than the snapshot's: rebuilt, not opened.
    assert not corpus.opened_snapshot
    assert sorted(corpus.pos_of) == sorted(ids)


def test_a_damaged_edges_file_is_never_served(tmp_path: Path) -> None:
    first = _brain(tmp_path / "db")
    ids = _fill(first)
    link = Relationship(ids[0], ids[1], RelationshipType.DEPENDS_ON, scope=SCOPE)
    first.store.add_relationships([link])
    corpus = _mirror(first)  # the snapshot holds the edge
    snaps = first._snapshots()
    assert snaps is not None
    where = snaps.path / (snaps.path / "CURRENT").read_text(encoding="utf-8")
    edges = where / "edges.arrow"
    data = bytearray(edges.read_bytes())
    data[len(data) // 2] ^= 0xFF
    edges.write_bytes(bytes(data))
    assert snaps.load() is None  # its checksum fails: rebuilt from the store instead
    reader = _brain(tmp_path / "db")
    assert [r.id for r in _mirror(reader).edges([ids[1]])] == [link.id]
    assert not reader.retriever.corpus.opened_snapshot
    assert corpus.edges([ids[0]])[0].id == link.id


def test_a_benchmark_s_throwaway_stores_leave_no_mark_behind(data_dir: Path) -> None:
    # Each store opened leaves a mark in the data dir, so that one gone whole is refused
    # (`store.seen`); a benchmark's stores in a temporary directory would pile marks up there.
    kept = _brain(data_dir.parent / "kept")
    _fill(kept, 2)
    with seen.scratch("octobrain-test-") as tmp:
        _fill(_brain(tmp / "db"), 2)
        _fill(_brain(tmp / "nested" / "db"), 2)
        _fill(_brain(tmp), 2)  # (a store in the directory itself, as several benches make)
        assert len(list((data_dir / seen.FOLDER).glob("*.json"))) == 4
    assert not tmp.exists()
    [left] = (data_dir / seen.FOLDER).glob("*.json")
    assert left == seen.mark_of(str(data_dir.parent / "kept"))
