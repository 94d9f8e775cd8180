"""An index killed between its two commits (the new chunks, then the source row that makes
them visible) leaves chunks no source row names: `doctor` names them, `doctor
--drop-orphan-chunks` and the next knowledge write delete them, and a damaged chunk is never
taken for one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from tests.reliability.damage_support import run_cli
from tests.reliability.kills import SCOPE, guide, knowledge_at

SECTIONS = 120

# Index a small note (so the tables exist), then a big guide with the source row's commit
# replaced by a SIGKILL: the process dies after its chunks are committed, before the flip.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.knowledge import Knowledge
    from octobrain.knowledge.store import KnowledgeStore

    k = Knowledge(sys.argv[2], config=Config(), embedder=get_embedder("hash:64"), uri=sys.argv[1])
    k.index(sys.argv[3])

    def killed(self, source_row):
        os.kill(os.getpid(), signal.SIGKILL)

    KnowledgeStore._flip = killed
    k.index(sys.argv[4])
    """
)


@pytest.fixture
def half_indexed(env: dict[str, str], tmp_path: Path) -> tuple[Path, Path]:
    """A store whose index of a 120-section guide was killed between its commits; returns it
    and the guide."""
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    note = tmp_path / "note.md"
    note.write_text("# Lease\n\nThe write lease is renewed every 20 seconds.\n")
    big = guide(tmp_path / "guide.md", "bluegreen", SECTIONS)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), SCOPE, str(note), str(big)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    k = knowledge_at(store)
    assert k.kstore.count_chunks() > SECTIONS  # the chunks' commit landed
    assert [s.uri for s in k.list_sources()] == [note.as_uri()]  # the source row's did not
    return store, big


def test_doctor_names_chunks_left_by_a_killed_index_and_drops_them(
    env: dict[str, str], half_indexed: tuple[Path, Path]
) -> None:
    store, big = half_indexed
    orphans = knowledge_at(store).kstore.count_chunks() - 1
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and report["orphan_chunks"] == orphans, out
    (problem,) = report["problems"]
    assert problem["table"] == "knowledge_chunks" and not problem["damage"], problem
    assert f"{orphans:,} chunk(s) of 1 source that no source row names" in problem["problem"]
    assert big.as_uri() in problem["problem"], problem
    assert "octobrain doctor --drop-orphan-chunks" in problem["repair"], problem

    rc, out, err = run_cli(env, "doctor", "--drop-orphan-chunks")
    assert rc == 0, out + err
    assert f"knowledge_chunks: {orphans} orphan chunk(s) deleted" in err
    assert "ok: nothing is wrong" in out
    assert knowledge_at(store).kstore.count_chunks() == 1  # the note's chunk kept
    rc, _, err = run_cli(env, "doctor", "--drop-orphan-chunks")  # nothing left: nothing done
    assert rc == 0 and "0 orphan chunk(s) deleted" in err, err


def test_the_next_knowledge_write_drops_them(
    half_indexed: tuple[Path, Path], tmp_path: Path
) -> None:
    store, _ = half_indexed
    other = tmp_path / "other.md"
    other.write_text("# Canary\n\nCanary releases start at 5 percent of traffic.\n")
    k = knowledge_at(store)
    k.index(str(other))
    assert k.kstore.count_chunks() == 2
    assert len(k.list_sources()) == 2
    assert diagnose(StoreLocation(store)).ok


def test_a_damaged_orphan_is_left_to_its_repair(
    env: dict[str, str], half_indexed: tuple[Path, Path], tmp_path: Path
) -> None:
    # One of the orphans' checksums no longer matches (its source id may be what changed on
    # disk): it is named as damage, and neither repair deletes it unseen.
    store, _ = half_indexed
    k = knowledge_at(store)
    (victim,) = k.kstore.scan_chunks("chunk_index = 3", ["id"])
    k.kstore.chunks.update(where=f"id = '{victim['id']}'", values={"title": "Changed on disk"})
    rc, _, err = run_cli(env, "doctor", "--drop-orphan-chunks")
    assert rc == 1, err
    other = tmp_path / "other.md"
    other.write_text("# Canary\n\nCanary releases start at 5 percent of traffic.\n")
    knowledge_at(store).index(str(other))
    left = knowledge_at(store).kstore.scan_chunks("true", ["id"])
    assert victim["id"] in {row["id"] for row in left} and len(left) == 3
    report = diagnose(StoreLocation(store))
    assert [p.table for p in report.problems] == ["knowledge_chunks"] and not report.orphan_chunks
