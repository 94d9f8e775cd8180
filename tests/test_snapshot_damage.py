"""The mirror's snapshot is never served stale, damaged or half-written: damage detected and
rebuilt, another model's or another store's copy not used, a killed writer's left in force."""

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

from octobrain.memory.page_check import PageCheck, SnapshotDamaged
from octobrain.memory.snapshot import CURRENT, LAZY, SnapshotDir
from tests.snapshot_support import (
    SCOPE,
    _brain,
    _current,
    _fill,
    _found,
    _opened_from_snapshot,
    _snap_dir,
)
from tests.snapshot_support import data_dir as data_dir  # the fixture, shared


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


def test_a_lazily_checked_file_is_verified_block_by_block_as_it_is_read(tmp_path: Path) -> None:
    import zlib

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


def test_a_briefing_reading_a_damaged_vector_block_names_it_and_briefs_from_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the briefing's lazy read of a damaged block of vectors.npy (a byte flipped on
    # disk) raised SnapshotDamaged out of `octobrain brief` (exit 1, a traceback) and out of
    # the SessionStart hook (an empty briefing); a chaos run of stop 61 found it.
    from octobrain.memory.briefing import build_briefing
    from octobrain.memory.render_brief import briefing_markdown

    first = _brain(tmp_path / "db")
    _fill(first)
    expected = briefing_markdown(build_briefing(first))
    vectors = _current(first) / "vectors.npy"
    data = bytearray(vectors.read_bytes())
    for at in range(200, len(data), 4096):  # (a byte of every block past the header)
        data[at] ^= 0xFF
    vectors.write_bytes(bytes(data))
    reader = _brain(tmp_path / "db")
    assert briefing_markdown(build_briefing(reader)) == expected
    assert "memory snapshot damaged (vectors.npy fails its checksum" in caplog.text
