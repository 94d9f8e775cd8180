"""Roles across export and import: an export keeps each memory's role and an import restores
it; a role's export holds what it sees (its memories and role-less ones); a role's import writes
no memory into another role's space, nor links its memories to another role's."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.errors import InvalidInput
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from tests.cli_memory_support import memory_env
from tests.test_roles import PLAN, REVIEW, SCOPE, SHARED, _brain

__all__ = ["memory_env"]


def _store(root: Path) -> dict[str, str]:
    """A memory of no role, one a reviewer's and one a planner's, linked: their ids."""
    ids = {}
    for role, (title, content) in (("", SHARED), ("reviewer", REVIEW), ("planner", PLAN)):
        with _brain(root, role) as brain:
            ids[role or "shared"] = brain.memorize(title, content)[0].id
    with _brain(root) as brain:
        brain.relate(ids["reviewer"], ids["planner"], "related_to")
    return ids


def _export(root: Path, role: str = "") -> list[str]:
    out = io.StringIO()
    with _brain(root, role) as brain:
        export_jsonl(brain, out)
    return out.getvalue().splitlines()


def _roles(root: Path) -> dict[str, str]:
    with _brain(root) as brain:
        return {m.id: m.role for m in brain.recent(limit=50)}


def test_an_export_keeps_each_memory_s_role_and_an_import_restores_it(tmp_path: Path) -> None:
    ids = _store(tmp_path / "a")
    lines = _export(tmp_path / "a")
    with _brain(tmp_path / "b") as brain:
        assert import_jsonl(brain, lines).imported == 3
    want = {ids["shared"]: "", ids["reviewer"]: "reviewer", ids["planner"]: "planner"}
    assert _roles(tmp_path / "b") == want
    # A role's export is its sight: its memories and the role-less ones, brought back as they
    # were by the same role's import.
    mine = _export(tmp_path / "a", "reviewer")
    with _brain(tmp_path / "c", "reviewer") as brain:
        report = import_jsonl(brain, mine)
    assert (report.imported, report.relationships) == (2, 0)
    assert _roles(tmp_path / "c") == {ids["shared"]: "", ids["reviewer"]: "reviewer"}


def test_a_role_s_import_of_another_role_s_memories_is_refused(tmp_path: Path) -> None:
    # The reviewer's import stored the planner's memories as the planner's: a role wrote
    # into a space it cannot read.
    _store(tmp_path / "a")
    lines = _export(tmp_path / "a")
    planner_line = next(i for i, line in enumerate(lines, 1) if '"planner"' in line)
    with (
        _brain(tmp_path / "b", "reviewer") as brain,
        pytest.raises(InvalidInput, match="another role's; nothing was imported") as refused,
    ):
        import_jsonl(brain, lines)
    assert refused.value.field == f"line {planner_line}.role"
    assert _roles(tmp_path / "b") == {}


def test_a_role_s_import_links_nothing_to_another_role_s_memory(tmp_path: Path) -> None:
    # An edge from the reviewer's memory to the planner's was stored (and said so), where
    # the same edge to an id the store lacks was refused: the reviewer linked into the
    # planner's graph and learnt which of its ids exist.
    ids = _store(tmp_path)
    reviewer_row = next(
        json.loads(line) for line in _export(tmp_path, "reviewer") if ids["reviewer"] in line
    )
    mine = {**reviewer_row, "id": str(uuid.uuid4())}
    header = {"kind": "header", "format": "octobrain-export", "version": 2, "scope": SCOPE}
    edges = [
        {"kind": "relationship", "id": str(uuid.uuid4()), "source_id": mine["id"],
         "target_id": target, "relationship_type": "related_to", "strength": 1.0,
         "description": "", "created_at": mine["created_at"], "scope": SCOPE}
        for target in (ids["planner"], str(uuid.uuid4()), ids["shared"])
    ]  # fmt: skip
    end = {"kind": "end", "memory": 1, "relationship": 3, "consolidation": 0}
    lines = [json.dumps(row) for row in (header, mine, *edges, end)]
    with _brain(tmp_path, "reviewer") as brain:
        report = import_jsonl(brain, lines)
    # The planner's memory is an end the store does not hold, as the unknown id is.
    assert (report.imported, report.relationships, report.relationships_missing_end) == (1, 1, 2)
    with _brain(tmp_path) as everyone:
        _, links = everyone.graph(ids["planner"])
        assert all(mine["id"] not in (e.source_id, e.target_id) for e in links)


def test_the_cli_s_role_import_is_refused_for_another_role_s_file(
    memory_env: dict[str, str], tmp_path: Path
) -> None:
    def memory(*args: str) -> tuple[int, str]:
        done = CliRunner().invoke(main, ["memory", "--scope", SCOPE, *args])
        return done.exit_code, done.output

    assert memory("--role", "planner", "memorize", "-t", PLAN[0], "-c", PLAN[1])[0] == 0
    backup = tmp_path / "all.jsonl"
    assert memory("export", str(backup))[0] == 0
    code, said = memory("--role", "reviewer", "import", str(backup))
    assert code != 0 and 'line 2.role: is "planner"' in said, said
    assert memory("--role", "planner", "import", str(backup))[0] == 0  # its own: present
