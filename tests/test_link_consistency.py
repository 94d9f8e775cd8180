"""Links between two memories that say opposite things, made across calls: the store keeps one
rule (`store.edges.check_link`), whichever call (`relate`, a memorize answered by a copy) or
order made them."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from octobrain.models import Memory

SCOPE = "github.com/acme/api"
OLD = ("API timeout", "The API timeout is 30 seconds.")
NEW = ("API timeout now", "The API timeout is 45 seconds.")


@pytest.fixture
def brain(tmp_path: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db")


def _pair(brain: Brain, kind: str = "supersedes") -> tuple[Memory, Memory]:
    old, _ = brain.memorize(*OLD)
    new, _ = brain.memorize(*NEW, related_to=[{"target_id": old.id, "relationship_type": kind}])
    return old, new


def _links(brain: Brain, memory_id: str) -> list[tuple[str, str, str]]:
    _, edges = brain.graph(memory_id)
    return sorted((e.source_id, e.relationship_type.value, e.target_id) for e in edges)


def _seen(brain: Brain, old: Memory) -> tuple[list[str], list[str]]:
    """What `remember` says of `old`: by what it is superseded, by what outranked."""
    hits = brain.remember("API timeout seconds", min_relevance=0.0).hits
    (hit,) = [h for h in hits if h.memory.id == old.id]
    return hit.superseded_by, hit.outranked_by


def test_a_copy_sent_again_as_in_conflict_keeps_the_supersession(brain: Brain) -> None:
    # Before: the second memorize (answered by the copy held) added `conflicts` beside the
    # `supersedes` the first made: the old memory ranked as replaced and as outranked.
    old, new = _pair(brain)
    again = brain.memorize(
        *NEW, related_to=[{"target_id": old.id, "relationship_type": "conflicts"}]
    )
    assert again[0].id == new.id and again[1] == [] and again.already is not None
    assert _links(brain, old.id) == [(new.id, "supersedes", old.id)]
    assert _seen(brain, old) == ([new.id], [])


@pytest.mark.parametrize("backwards", [False, True])
def test_a_memory_and_one_it_supersedes_are_not_linked_as_in_conflict(
    brain: Brain, backwards: bool
) -> None:
    # Before: `relate` stored the conflicts link (either way) beside the supersession.
    old, new = _pair(brain)
    source, target = (old, new) if backwards else (new, old)
    with pytest.raises(InvalidInput, match=r"^target_id: .* supersedes .*settled.*unrelate"):
        brain.relate(source.id, target.id, "conflicts")
    assert _links(brain, old.id) == [(new.id, "supersedes", old.id)]


@pytest.mark.parametrize("backwards", [False, True])
def test_a_supersession_replaces_the_conflict_it_settles(brain: Brain, backwards: bool) -> None:
    # Before: conflicts first, supersedes later kept both edges; the dispute now is settled.
    old, new = _pair(brain, "conflicts")
    if backwards:  # the old statement said to prevail over the new one
        brain.unrelate(new.id, old.id)
        brain.relate(old.id, new.id, "conflicts")
    brain.relate(new.id, old.id, "supersedes")
    assert _links(brain, old.id) == [(new.id, "supersedes", old.id)]
    assert _seen(brain, old) == ([new.id], [])


def test_a_copy_that_supersedes_replaces_its_conflict(brain: Brain) -> None:
    old, new = _pair(brain, "conflicts")
    brain.memorize(*NEW, related_to=[{"target_id": old.id, "relationship_type": "supersedes"}])
    assert _links(brain, old.id) == [(new.id, "supersedes", old.id)]


def _cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["memory", "--scope", SCOPE, *args])
        assert result.exit_code == 0, result.output
        return result.output

    return run


def test_the_answer_says_which_dispute_a_supersession_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: relate (or a memorize answered by its copy) deleted the conflicts edge between
    # the two memories without a word, in text and JSON: a recorded dispute gone unseen.
    run = _cli(tmp_path, monkeypatch)
    old = json.loads(run("memorize", "-t", OLD[0], "-c", OLD[1], "--format", "json"))["id"]
    new = json.loads(run("memorize", "-t", NEW[0], "-c", NEW[1], "--format", "json"))["id"]
    settled = f"Dispute settled: {old} conflicts {new} removed (a memory replaced is not in"
    run("relate", old, new, "-t", "conflicts")
    assert settled in run("relate", new, old, "-t", "supersedes")
    run("unrelate", new, old)
    dispute = json.loads(run("relate", old, new, "-t", "conflicts", "--format", "json"))
    again = json.loads(run("memorize", "-t", NEW[0], "-c", NEW[1], "--supersedes", old,
                           "--format", "json"))  # fmt: skip
    del dispute["already_linked"], dispute["settled"]
    assert again["already_stored"]["settled"] == [dispute]
    run("unrelate", new, old)
    run("relate", old, new, "-t", "conflicts")
    assert settled in run("memorize", "-t", NEW[0], "-c", NEW[1], "--supersedes", old)
    run("unrelate", new, old)
    run("relate", old, new, "-t", "conflicts")
    answer = json.loads(run("relate", new, old, "-t", "supersedes", "--format", "json"))
    assert [(e["source_id"], e["relationship_type"]) for e in answer["settled"]] == [
        (old, "conflicts")
    ]


@pytest.mark.parametrize("kind", ["conflicts", "extends", "implements"])
def test_a_one_way_link_is_refused_backwards(brain: Brain, kind: str) -> None:
    # Before: A extends B and B extends A were both stored (each built on the other).
    old, new = _pair(brain, kind)
    with pytest.raises(InvalidInput, match=rf"^target_id: {new.id} already {kind} {old.id}: "):
        brain.relate(old.id, new.id, kind)
    with pytest.raises(InvalidInput, match=rf"^related_to\[0\]: {new.id} already {kind}"):
        brain.memorize(*OLD, related_to=[{"target_id": new.id, "relationship_type": kind}])
    assert _links(brain, old.id) == [(new.id, kind, old.id)]


@pytest.mark.parametrize("kind", ["related_to", "similar", "depends_on"])
def test_links_that_hold_both_ways_are_kept_both_ways(brain: Brain, kind: str) -> None:
    old, new = _pair(brain, kind)
    brain.relate(old.id, new.id, kind)
    assert _links(brain, old.id) == sorted([(new.id, kind, old.id), (old.id, kind, new.id)])


def _with_links(brain: Brain, *links: tuple[str, str, str]) -> list[str]:
    """An export of `brain` with `links` (source, type, target) added after its own, in order."""
    out = io.StringIO()
    export_jsonl(brain, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    *body, end = rows
    fields = {
        "scope": SCOPE,
        "strength": 0.8,
        "description": "",
        "created_at": "2026-01-01T00:00:00Z",
    }
    made = [
        {"kind": "relationship", "id": str(uuid.uuid4()), "source_id": s, "target_id": t,
         "relationship_type": k, **fields}
        for s, k, t in links
    ]  # fmt: skip
    end["relationship"] += len(made)
    return [json.dumps(r) for r in (*body, *made, end)]


def test_an_import_keeps_the_rule_for_the_links_it_brings(brain: Brain) -> None:
    # Before: every link of the file was stored: a supersedes cycle (both memories ranked as
    # replaced), a conflicts link beside the supersession, an extends link backwards.
    old, new = _pair(brain)
    brain.relate(new.id, old.id, "extends")
    lines = _with_links(
        brain,
        (old.id, "supersedes", new.id),
        (new.id, "conflicts", old.id),
        (old.id, "extends", new.id),
    )
    report = import_jsonl(brain, lines)
    assert (report.relationships, report.relationships_existing) == (0, 2)
    assert (report.relationships_not_stored, report.relationships_contradicting) == (3, 3)
    assert _links(brain, old.id) == sorted(
        [(new.id, "supersedes", old.id), (new.id, "extends", old.id)]
    )


def test_a_supersession_imported_replaces_the_conflict_it_settles(brain: Brain) -> None:
    old, new = _pair(brain, "conflicts")
    other, _ = brain.memorize("Cache size", "The cache holds 100 entries.")
    # the store's conflict, and one the same file brings before its supersession
    lines = _with_links(
        brain, (old.id, "conflicts", other.id), (new.id, "supersedes", old.id),
        (other.id, "supersedes", old.id),
    )  # fmt: skip
    report = import_jsonl(brain, lines)
    assert (report.relationships, report.relationships_contradicting) == (2, 1)
    assert _links(brain, old.id) == sorted(
        [(new.id, "supersedes", old.id), (other.id, "supersedes", old.id)]
    )


def test_a_global_export_holds_no_projects_link_and_imports_back(
    brain: Brain, tmp_path: Path
) -> None:
    # A project's link between two global memories (which an import of that project's file
    # stores) was written into the global export too, whose import then refused the whole
    # file: 'line 4.scope: is 'github.com/acme/api', where the file's header scope is global'.
    a, _ = brain.memorize("Tab width", "Tabs are four spaces wide.", global_=True)
    b, _ = brain.memorize("Commits", "Commit messages use the imperative mood.", global_=True)
    assert import_jsonl(brain, _with_links(brain, (a.id, "related_to", b.id))).relationships == 1
    hash64 = get_embedder("hash:64")
    everyone = Brain("", config=Config(), embedder=hash64, uri=tmp_path / "db")
    out = io.StringIO()
    export_jsonl(everyone, out)
    assert '"kind": "relationship"' not in out.getvalue()
    elsewhere = Brain("", config=Config(), embedder=hash64, uri=tmp_path / "copy")
    assert import_jsonl(elsewhere, out.getvalue().splitlines()).imported == 2
    project = io.StringIO()
    export_jsonl(brain, project)  # the link stays in its project's export
    assert project.getvalue().count('"kind": "relationship"') == 1


def test_an_import_closes_one_goal_per_memory(brain: Brain) -> None:
    # Before: the one-goal rule was left to `relate` and `memorize`; an import stored a second
    # `closes` link from a note (the store's goal and the file's, or two the file brings).
    goals = [brain.memorize(f"Goal {n}", f"Ship step {n}.", memory_type="goal")[0] for n in "abc"]
    note, _ = brain.memorize("Shipped", "Steps a and b are out.")
    other, _ = brain.memorize("Shipped too", "Step c is out.")
    brain.relate(note.id, goals[0].id, "closes")
    lines = _with_links(
        brain, (note.id, "closes", goals[1].id), (other.id, "closes", goals[2].id),
        (other.id, "closes", goals[1].id), (note.id, "closes", goals[0].id),
    )  # fmt: skip
    report = import_jsonl(brain, lines)
    assert (report.relationships, report.relationships_existing) == (1, 2)
    assert (report.relationships_not_stored, report.relationships_contradicting) == (2, 2)
    assert _links(brain, note.id) == [(note.id, "closes", goals[0].id)]
    assert _links(brain, other.id) == [(other.id, "closes", goals[2].id)]
