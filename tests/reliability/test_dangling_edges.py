"""A `forget` killed between its two commits (the memories, then their edges) leaves edges to a
memory that is gone: `doctor` names them, `doctor --drop-dangling-edges` and the store's
maintenance pass delete them, and edges a half-done consolidation holds are left to its repair."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.store import upkeep
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from tests.reliability.damage_support import run_cli

SCOPE = "github.com/acme/api"

# Memorize a decision and two notes linked to it, print their ids, then forget the decision
# with the edge table's delete replaced by a SIGKILL: the process dies between the commit that
# removed the memory and the one that would remove its edges.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from lancedb.table import LanceTable
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    brain = Brain(sys.argv[2], config=Config(), embedder=get_embedder("hash:64"), uri=sys.argv[1])
    hub, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    link = [{"target_id": hub.id, "relationship_type": "related_to"}]
    a, _ = brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    b, _ = brain.memorize("Key storage", "Signing keys live in the vault.", related_to=link)
    print(hub.id, a.id, b.id, flush=True)
    delete = LanceTable.delete

    def killed(self, where):
        if self.name == "relationships":
            os.kill(os.getpid(), signal.SIGKILL)
        return delete(self, where)

    LanceTable.delete = killed
    brain.forget([hub.id], confirm=True)
    """
)


def brain_at(store: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)


@pytest.fixture
def half_forgotten(env: dict[str, str]) -> tuple[Path, list[str]]:
    """A store whose `forget` of a memory with two edges was killed between its commits;
    returns it and the ids (the forgotten one first)."""
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), SCOPE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    ids = done.stdout.split()
    assert len(ids) == 3, done.stdout
    return store, ids


def test_doctor_names_edges_left_by_a_killed_forget_and_drops_them(
    env: dict[str, str], half_forgotten: tuple[Path, list[str]]
) -> None:
    store, (gone, *kept) = half_forgotten
    brain = brain_at(store)
    assert gone not in {m.id for m in brain.recent(10)}  # the memory's commit landed
    assert len(brain.store.relationships_of(kept)) == 2  # its edges' did not
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and report["dangling_edges"] == 2, out
    (problem,) = report["problems"]
    assert problem["table"] == "relationships", problem
    assert "2 edge(s) point at a memory that no longer exists" in problem["problem"], problem
    assert "octobrain doctor --drop-dangling-edges" in problem["repair"], problem

    rc, out, err = run_cli(env, "doctor", "--drop-dangling-edges")
    assert rc == 0, out + err
    assert "relationships: 2 dangling edge(s) deleted" in err and "ok: nothing is wrong" in out
    assert brain_at(store).store.relationships_of(kept) == []
    rc, _, err = run_cli(env, "doctor", "--drop-dangling-edges")  # nothing left: nothing done
    assert rc == 0 and "0 dangling edge(s) deleted" in err, err


def test_the_maintenance_pass_drops_them_and_keeps_live_edges(
    half_forgotten: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, (_, first, second) = half_forgotten
    brain = brain_at(store)
    monkeypatch.setattr(upkeep, "COMPACT_EVERY", 1)  # the next write falls due
    live = [{"target_id": first, "relationship_type": "related_to"}]
    note, _ = brain.memorize("Token audit", "Audit refresh token reuse weekly.", related_to=live)
    edges = brain.store.relationships_of([first, second, note.id])
    assert [(e.source_id, e.target_id) for e in edges] == [(note.id, first)]
    assert diagnose(brain.store.location).ok


def test_a_store_without_dangling_edges_is_left_unopened(env: dict[str, str]) -> None:
    rc, out, err = run_cli(env, "doctor", "--drop-dangling-edges")
    assert rc == 0 and "0 dangling edge(s) deleted" in err, out + err
    assert "absent" in out and not Path(env["OCTOBRAIN_DATA_DIR"], "db").exists()


def test_edges_to_memories_of_lost_versions_are_named_apart_and_kept(env: dict[str, str]) -> None:
    # The newest memories manifest and the version hint deleted by hand: the table opens one
    # version back, and the edge to the lost memory looked like a killed forget's, with a
    # repair that would delete the only trace of what was lost.
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain = brain_at(store)
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    brain.memorize("Refresh rotation", "Refresh tokens rotate.", related_to=[{"target_id": a.id}])
    versions = store / "memories.lance" / "_versions"
    min(versions.glob("*.manifest")).unlink()  # names count down: the smallest is the newest
    (versions / "latest_version_hint.json").unlink()
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    (problem,) = json.loads(out)["problems"]  # octobrain's version record names the loss
    assert rc == 1 and "version 3 committed (recorded in" in problem["problem"], problem
    # Without that record too (a store from before it), the edges are the sign of the loss.
    (store / "_octobrain" / "versions.json").unlink()
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and report["dangling_edges"] == 0, out
    (problem,) = report["problems"]
    assert problem["table"] == "memories" and "likely lost" in problem["problem"], problem
    rc, _, err = run_cli(env, "doctor", "--drop-dangling-edges")
    assert "0 dangling edge(s) deleted" in err, err
    # The trace is kept (read raw: this process saw version 3, so its stores refuse the table).
    assert StoreLocation(store).connect().open_table("relationships").count_rows() == 1


def test_a_store_with_only_dangling_edges_still_migrates(
    env: dict[str, str], half_forgotten: tuple[Path, list[str]], tmp_path: Path
) -> None:
    # The new check made `migrate` refuse such a store as damaged: no reader sees those edges,
    # so they are named by `doctor` but stop nothing.
    rc, out, err = run_cli(env, "memory", "migrate", "--to", str(tmp_path / "copy"))
    assert rc == 0, out + err


def test_an_edge_dated_ahead_of_the_clock_is_no_sign_of_lost_versions(
    env: dict[str, str],
) -> None:
    # An edge imported from a machine whose clock ran ahead is dated after memories' newest
    # version: it was named "versions likely lost" and never swept.
    from datetime import timedelta

    from octobrain.models import Relationship, RelationshipType
    from octobrain.store.sql import sql_in
    from octobrain.times import utcnow

    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain = brain_at(store)
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    b, _ = brain.memorize("Refresh rotation", "Refresh tokens rotate on use.")
    ahead = utcnow() + timedelta(days=300)
    edge = Relationship(b.id, a.id, RelationshipType.RELATED_TO, scope=SCOPE, created_at=ahead)
    brain.store.add_relationships([edge])
    with brain.store.write_lock():
        brain.store.memories.delete(sql_in("id", [a.id]))  # a forget cut after its first commit
    report = diagnose(brain.store.location)
    assert report.dangling_edges == 1 and [p.table for p in report.problems] == ["relationships"]
    assert brain_at(store).store.drop_dangling_edges() == 1
