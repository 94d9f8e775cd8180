"""Edges from a memory to itself, as two `memory ingest`s of one export at once left them before
94760ef: `doctor` names them (it said "ok"), `doctor --drop-self-links` deletes them and no other
edge, and no writer stores one any more (`link_rules.check_not_self`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.store import schema, upkeep
from octobrain.store.doctor import diagnose
from octobrain.store.writes import append
from tests.reliability.damage_support import run_cli

SCOPE = "github.com/acme/api"
SELF = "a memory does not link to itself"


def brain_at(store: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)


def self_link(brain: Brain, memory_id: str) -> Relationship:
    """An edge from `memory_id` to itself, appended as the store appended every edge before
    it refused them (the row the ingest race wrote: the turn "said before" itself)."""
    rel = Relationship(memory_id, memory_id, RelationshipType.SAME_SESSION, 0.5, "said next", SCOPE)
    with brain.store.write_lock():
        append(brain.store, brain.store.relationships, [schema.relationship_to_row(rel)])
    return rel


def edges(store: Path) -> list[tuple[str, str, str]]:
    """Every edge of the store at `store` (id, source, target), read afresh."""
    return sorted(
        (r.id, r.source_id, r.target_id) for r in brain_at(store).store.all_relationships()
    )


def test_doctor_names_a_self_link_and_drops_it_alone(env: dict[str, str]) -> None:
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain = brain_at(store)
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    link = [{"target_id": a.id, "relationship_type": "related_to"}]
    b, _ = brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    assert diagnose(brain.store.location).ok
    looped = self_link(brain, a.id)
    kept = [e for e in edges(store) if e[0] != looped.id]
    assert [(s, t) for _, s, t in kept] == [(b.id, a.id)]

    # Before: "ok: nothing is wrong", exit 0.
    report = diagnose(brain.store.location)
    assert (report.self_links, report.self_linked, report.dangling_edges) == (1, [a.id], 0)
    (problem,) = report.problems
    assert problem.table == "relationships" and not problem.damage, problem  # (migrate goes on)
    assert f"1 edge(s) link a memory to itself, of 1 memory ({a.id})" in problem.problem
    assert "`octobrain doctor --drop-self-links`" in problem.repair
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    said = json.loads(out)
    assert rc == 1 and (said["self_links"], said["self_linked"]) == (1, [a.id]), out
    assert [p["problem"] for p in said["problems"]] == [problem.problem]
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "problem: relationships: 1 edge(s) link a memory to itself" in out, out

    rc, out, err = run_cli(env, "doctor", "--drop-self-links")
    assert rc == 0 and err == "relationships: 1 self-link(s) deleted\n", out + err
    assert "ok: nothing is wrong" in out
    assert edges(store) == kept  # no other edge touched
    assert {m.id for m in brain_at(store).recent(10)} == {a.id, b.id}  # the memories stay
    rc, _, err = run_cli(env, "doctor", "--drop-self-links")
    assert rc == 0 and err == "relationships: 0 self-link(s) deleted\n", err


def test_many_are_counted_and_five_named(env: dict[str, str]) -> None:
    brain = brain_at(Path(env["OCTOBRAIN_DATA_DIR"]) / "db")
    ids = [brain.memorize(f"Fact {i}", f"Durable fact {i} about the API.")[0].id for i in range(7)]
    for memory_id in ids:
        self_link(brain, memory_id)
    self_link(brain, ids[0])  # (two edges of one memory: one memory named)
    report = diagnose(brain.store.location)
    first = sorted(ids)[:5]
    assert (report.self_links, report.self_linked) == (8, first)
    (problem,) = report.problems
    assert f"of 7 memories ({', '.join(first)} (and 2 more))" in problem.problem, problem
    assert brain.store.drop_self_links() == 8 and diagnose(brain.store.location).ok


def test_beside_dangling_edges_both_are_named(env: dict[str, str]) -> None:
    # The dangling edges' check passes over a table any problem names: the self-links' check
    # runs after it, and over a damaged table only.
    from octobrain.store.sql import sql_in

    brain = brain_at(Path(env["OCTOBRAIN_DATA_DIR"]) / "db")
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    b, _ = brain.memorize(
        "Refresh rotation", "Refresh tokens rotate.", related_to=[{"target_id": a.id}]
    )
    self_link(brain, b.id)
    with brain.store.write_lock():
        brain.store.memories.delete(sql_in("id", [a.id]))  # a forget cut after its first commit
    report = diagnose(brain.store.location)
    assert (report.dangling_edges, report.self_links) == (1, 1), report.problems
    assert brain.store.drop_self_links() == 1
    assert brain.store.drop_dangling_edges() == 1 and diagnose(brain.store.location).ok


def test_no_writer_stores_a_self_link(env: dict[str, str]) -> None:
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain = brain_at(store)
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    rule = f"must differ from source_id: both are memory {a.id}, and {SELF}"
    rel = Relationship(a.id, a.id, RelationshipType.RELATED_TO, scope=SCOPE)
    # Before: each of the store's three edge writers appended it.
    with pytest.raises(InvalidInput, match=f"^target_id: {rule}$"):
        brain.store.add_relationships([rel])
    with pytest.raises(InvalidInput, match=f"^target_id: {rule}$"):
        brain.store.link_once(rel)
    note = Memory(title="Key storage", content="Signing keys live in the vault.", scope=SCOPE)
    looped = Relationship(note.id, note.id, RelationshipType.SAME_SESSION, scope=SCOPE)
    vector = np.zeros((1, brain.store.dim), dtype=np.float32)
    vector[0, 0] = 1.0
    with pytest.raises(InvalidInput, match=f"^related_to: must differ .* memory {note.id},"):
        brain.store.add([note], vector, [looped])
    # `relate` by two spellings of one id: the rule names the memory both are.
    with pytest.raises(InvalidInput, match=f"^target_id: {rule}$"):
        brain.relate(a.id[:8], a.id)
    rc, out, err = run_cli(env, "memory", "--scope", SCOPE, "relate", a.id[:8], a.id)
    assert (rc, out) == (2, "") and err == f"error: target_id: {rule}\n", err
    after = brain_at(store)
    assert after.store.all_relationships() == [] and [m.id for m in after.recent(5)] == [a.id]
    assert diagnose(after.store.location).ok


def test_the_maintenance_pass_drops_a_self_link_and_keeps_live_edges(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the pass swept dangling edges only, and a self-link stayed until `doctor` was
    # run by hand (`graph` showed `A --same_session--> A` meanwhile).
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain = brain_at(store)
    a, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    looped = self_link(brain, a.id)
    assert diagnose(brain.store.location).self_links == 1
    monkeypatch.setattr(upkeep, "COMPACT_EVERY", 1)  # the next write falls due
    live = [{"target_id": a.id, "relationship_type": "related_to"}]
    b, _ = brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=live)
    assert looped.id not in {e[0] for e in edges(store)}
    assert [(s, t) for _, s, t in edges(store)] == [(b.id, a.id)]
    assert diagnose(brain.store.location).ok
