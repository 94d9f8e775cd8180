"""A new process that wrote leaves the tail beside the snapshot as it ends, so the next new
process reads without importing LanceDB and answers as the store does; a tail that a racing
writer made stale is never replayed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from octobrain.config import Config, SearchConfig
from octobrain.memory import corpus_apply, tail
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from tests.test_hook_transcripts import SESSION, said
from tests.test_snapshot_get_stats import SCOPE, _brain, _snapshot
from tests.test_snapshot_get_stats import env as snapshot_env

env = snapshot_env  # (a CLI's store, the service off, a snapshot from one memory on)


def _store(env: dict[str, str], n: int = 12) -> list[str]:
    """`n` memories, and a snapshot of them current. Each of its own length: rows a query
    scores alike by words are told apart by their place in the mirror, which differs
    between two mirrors of one version caught up along different paths."""
    brain = _brain(env)
    memories = [
        Memory(
            title=f"Note {i}", content=f"The service uses setting zq{i}.{' More.' * i}", scope=SCOPE
        )
        for i in range(n)
    ]
    brain.store.add(memories, brain.embedder.embed_documents([m.content for m in memories]))
    _snapshot(env)
    return [m.id for m in memories]


def _octobrain(env: dict[str, str], *args: str, stdin: str | None = None) -> tuple[str, bool]:
    """What a new process of its own prints for `octobrain ARGS` (exit 0 asserted), and
    whether it imported LanceDB (`-X importtime` names every module it imports)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "octobrain", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout, " lancedb" in done.stderr


def _as_the_store(env: dict[str, str], tmp_path: Path, *args: str) -> str:
    """`args`' answer from a copy of the store read with the snapshot off (what that reader
    counts lands nowhere the test goes on with)."""
    copy = tmp_path / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(Path(env["OCTOBRAIN_DATA_DIR"]) / "db", copy / "db")
    (copy / "config.toml").write_text("[search]\nsnapshot_min_rows = 0\n")
    return _octobrain({**env, "OCTOBRAIN_DATA_DIR": str(copy)}, *args)[0]


def test_after_each_write_in_a_new_process_the_next_one_reads_without_lancedb(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: the writer left nothing, so the first reader after it imported LanceDB (a third
    # of such a process) to catch up, and only the one after that read the snapshot alone.
    ids = _store(env)
    memory = ("memory", "--scope", SCOPE)
    added, _ = _octobrain(
        env, *memory, "memorize", "-t", "Fresh note", "-c", "The cache uses setting zqnew.",
        "--format", "json",
    )  # fmt: skip
    new_id = json.loads(added)["id"]
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(said("We decided to keep the nightly export job.", "/src/export.py"))
    ended = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": "/",
             "hook_event_name": "SessionEnd"}  # fmt: skip
    writes = [
        ((), None),  # the memorize above
        ((*memory, "update", ids[5], "-c", "The service now uses setting zqedited."), None),
        ((*memory, "relate", ids[1], ids[2]), None),
        ((*memory, "forget", ids[3], "--yes"), None),
        (("hook", "session-end", "--scope", SCOPE), json.dumps(ended)),
    ]
    for write, stdin in writes:
        if write:
            assert _octobrain(env, *write, stdin=stdin)[1]  # (a writer imports LanceDB)
        for read in [
            ("get", new_id, "--format", "json"),
            ("remember", "setting zqnew zqedited zq1 zq3", "--format", "json"),
            ("remember", "nightly export job", "--format", "json"),
        ]:
            expected = _as_the_store(env, tmp_path, *memory, *read)
            answer, imported = _octobrain(env, *memory, *read)
            assert not imported, (write, read)
            assert answer == expected, (write, read)
    assert "nightly export" in answer  # (the session's digest)


def test_a_tail_that_cannot_be_written_fails_no_write(env: dict[str, str], tmp_path: Path) -> None:
    ids = _store(env)
    version = _brain(env).store.version()
    where = next((Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots").glob("*/v*"))
    for after in range(1, 4):  # (where the tail of each next version goes: taken)
        (where / f"tail-{version + after}.bin").mkdir()
    memory = ("memory", "--scope", SCOPE)
    done, _ = _octobrain(env, *memory, "update", ids[2], "-c", "The service now uses zqedited.")
    assert "The service now uses zqedited." in done  # (exit 0 and no traceback: asserted)
    assert not list(where.glob(".tail-*"))  # (nor the file it was written to first)
    # The next process catches up through LanceDB, as before, and answers as the store does.
    read = ("remember", "zqedited", "--format", "json")
    expected = _as_the_store(env, tmp_path, *memory, *read)
    assert _octobrain(env, *memory, *read) == (expected, True)


def test_a_writer_killed_while_leaving_its_tail_leaves_no_temp_file_for_long(
    env: dict[str, str],
) -> None:
    # A writer SIGKILLed as it wrote its tail (after its answer) left `.tail-N.bin.PID.tmp`
    # beside the snapshot, and no later writer took it away (each dropped only what was left
    # for the version it wrote): they gathered until the snapshot was written anew.
    ids = _store(env)
    version = _brain(env).store.version()
    where = next((Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots").glob("*/v*"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = where / f".tail-{version}.bin.{dead}.tmp"  # (a version no writer writes again)
    left.write_bytes(b"half a tail")
    writing = where / f".tail-{version}.bin.{os.getppid()}.tmp"  # (a writer still running)
    writing.write_bytes(b"")
    memory = ("memory", "--scope", SCOPE)
    _octobrain(env, *memory, "update", ids[2], "-c", "The service now uses zqedited.")
    assert [p.name for p in where.glob(".tail-*")] == [writing.name]
    assert list(where.glob("tail-*.bin"))  # (and its own tail left)


def test_a_writer_killed_before_it_moved_its_pointer_in_leaves_no_file_behind(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A snapshot writer killed between writing its pointer and moving it over CURRENT left
    # `.CURRENT.<hex>` beside the snapshots, which no later write removed (only directories).
    ids = _store(env)
    snapshots = Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots"
    [home] = [p for p in snapshots.iterdir() if p.is_dir()]
    (home / ".CURRENT.0badf00d").write_text("v2-0badf00d")
    before = (home / "CURRENT").read_text()
    monkeypatch.setattr(corpus_apply, "SNAPSHOT_STALE_ROWS", 1)  # (a snapshot, not a tail)
    _brain(env).update(ids[4], content="The cache service uses setting zqrewritten.")
    _snapshot(env)
    assert (home / "CURRENT").read_text() != before
    assert sorted(p.name for p in home.glob(".*")) == [".lock"]


def _race(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *, theirs_left: bool
) -> tuple[str, str, int]:
    """Two writers: the second commits (and leaves its tail, `theirs_left`) after the first
    caught up, before the first's tail lands. Their memories' ids, and the first's version."""
    _store(env)
    first, second = _brain(env), _brain(env)
    theirs: list[str] = []
    write = tail.write

    def late(where: Path, left: tail.Tail) -> None:
        if not theirs:
            theirs.append(second.memorize("Racing note", "The cache uses setting zqrace.")[0].id)
            if theirs_left:
                second.leave_tail()
        write(where, left)

    monkeypatch.setattr(tail, "write", late)
    mine = first.memorize("Fresh note", "The cache uses setting zqnew.")[0].id
    version = first.store.version()
    first.leave_tail()
    monkeypatch.setattr(tail, "write", write)
    return mine, theirs[0], version


def _found(brain: Brain) -> list[tuple[str, str]]:
    recall = brain.remember("setting zqrace zqnew", min_relevance=0.0, record_access=False)
    return [(h.memory.id, h.why) for h in recall.hits]


def _as_the_store_finds(env: dict[str, str]) -> list[tuple[str, str]]:
    config = Config(search=SearchConfig(snapshot_min_rows=0))
    uri = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    return _found(Brain(SCOPE, config=config, embedder=_brain(env).embedder, uri=uri))


def _finds_as_the_store(env: dict[str, str], ids: list[str], *, through_lancedb: bool) -> None:
    """A new reader finds `ids` and answers as the store does, reading it through LanceDB or
    from the snapshot and tail alone (`through_lancedb`)."""
    reader = _brain(env)
    found = _found(reader)
    assert reader.store.connected is through_lancedb
    assert found == _as_the_store_finds(env)
    assert set(ids) <= {mid for mid, _ in found}


def test_a_tail_a_racing_writer_made_stale_is_not_replayed(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs, version = _race(env, monkeypatch, theirs_left=False)
    left = list((Path(env["OCTOBRAIN_DATA_DIR"]) / "cache").rglob("tail-*.bin"))
    assert [p.name for p in left] == [f"tail-{version}.bin"]
    assert _brain(env).store.version() == version + 1
    # Of a version the store is past: replayed, the rest read through LanceDB; both notes.
    _finds_as_the_store(env, [mine, theirs], through_lancedb=True)


def test_a_tail_landing_late_leaves_the_newer_one_in_place(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the first writer's tail, landing after the second writer had committed and left
    # its own, removed that one, and the next process read the store through LanceDB.
    mine, theirs, _ = _race(env, monkeypatch, theirs_left=True)
    _finds_as_the_store(env, [mine, theirs], through_lancedb=False)


def test_a_writer_that_caught_up_past_another_writer_leaves_a_tail_of_both(
    env: dict[str, str],
) -> None:
    _store(env)
    first, second = _brain(env), _brain(env)
    mine = first.memorize("Fresh note", "The cache uses setting zqnew.")[0].id
    theirs = second.memorize("Racing note", "The cache uses setting zqrace.")[0].id
    first.leave_tail()  # (caught up to the second's commit too)
    second.leave_tail()  # (the tail is current: nothing more)
    _finds_as_the_store(env, [mine, theirs], through_lancedb=False)


def test_each_writer_replays_the_tail_left_and_reads_only_its_own_write(
    env: dict[str, str],
) -> None:
    # Before: a writer in a new process started from the snapshot, so its catch-up through
    # LanceDB read every write since the snapshot was rewritten (the 200th read 200 rows).
    _store(env)
    ids = []
    for i in range(3):
        writer = _brain(env)
        ids.append(writer.memorize(f"Fresh note {i}", f"The cache uses setting zqnew{i}.")[0].id)
        writer.leave_tail()
        steps = writer.retriever.corpus._steps or []
        assert len(steps) == i + 1 and [len(s.rows or []) for s in steps[-1:]] == [1], i
    reader = _brain(env)
    found = [
        (h.memory.id, h.why)
        for h in reader.remember(
            "setting zqnew0 zqnew1 zqnew2", min_relevance=0.0, record_access=False
        ).hits
    ]
    assert not reader.store.connected
    config = Config(search=SearchConfig(snapshot_min_rows=0))
    store = Brain(SCOPE, config=config, embedder=reader.embedder, uri=reader.uri)
    hits = store.remember(
        "setting zqnew0 zqnew1 zqnew2", min_relevance=0.0, record_access=False
    ).hits
    assert found == [(h.memory.id, h.why) for h in hits]
    assert set(ids) <= {mid for mid, _ in found}


def test_a_large_store_s_writers_leave_a_tail_until_the_snapshot_is_due(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: past 25,600 memories (the snapshot's rewrite waits for 1% of its rows to be
    # re-read), a writer dropped its tail at 256 rows re-read and left neither until that
    # 1%: every new process in between caught up through LanceDB (`memory recent` at
    # 100,000 memories: 0.9 s, not 0.3). Here the same shape at 12 memories: 2 rows, or a quarter.
    monkeypatch.setattr(corpus_apply, "SNAPSHOT_STALE_ROWS", 2)
    monkeypatch.setattr(corpus_apply, "SNAPSHOT_STALE_SHARE", 0.25)
    _store(env)
    snapshots = Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots"
    first = sorted(p.name for p in snapshots.glob("*/v*"))
    for i in range(8):
        writer = _brain(env)
        mine = writer.memorize(f"Fresh note {i}", f"The cache uses setting zqnew zq{i}.")[0].id
        writer.leave_tail()
        _finds_as_the_store(env, [mine] if i < 3 else [], through_lancedb=False)
    assert sorted(p.name for p in snapshots.glob("*/v*")) != first  # (rewritten once due)
