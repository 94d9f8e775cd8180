"""An untrusted MCP client: local files confined to the session's project, SSRF spellings, caps
on one call's work, and malformed protocol input."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig
from octobrain.server import BrainPool, build_server
from tests.server_support import PROJECT_A, call, run, workspace

OUTSIDE = Path("/etc/passwd")


def pool_for(db: Path, **knowledge: Any) -> BrainPool:
    config = Config(
        embedding=EmbeddingConfig(model="hash:64"), knowledge=KnowledgeConfig(**knowledge)
    )
    return BrainPool(config, uri=db)


def _project(tmp: Path) -> Path:
    project = tmp / "project"
    project.mkdir()
    (project / "notes.md").write_text("# Notes\n\nThe deploy key rotates every quarter.\n")
    (project / "link.md").symlink_to(OUTSIDE)
    return project


def _knowledge_replies(server: Any, calls: list[dict[str, Any]], **client: Any) -> list[Any]:
    replies: list[Any] = []

    async def body() -> None:
        async with Client(server, mode="legacy", **client) as c:
            for arguments in calls:
                replies.append(await call(c, "knowledge", **arguments))

    run(body)
    return replies


ESCAPES = [
    {"command": "read", "source": str(OUTSIDE)},
    {"command": "read", "source": "../../../../../../etc/hostname"},
    {"command": "read", "source": "link.md"},
    {"command": "read", "source": OUTSIDE.as_uri()},
    {"command": "search", "query": "root", "source": str(OUTSIDE)},
    {"command": "match", "pattern": "root", "source": "link.md"},
]


def test_mcp_reads_no_local_file_outside_the_project(tmp_path: Path, monkeypatch: Any) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    server = build_server(pool_for(tmp_path / "db"), workspace(project, PROJECT_A))
    inside = {"command": "read", "source": "notes.md"}
    *refused, allowed = _knowledge_replies(server, [*ESCAPES, inside])
    for arguments, (error, reply) in zip(ESCAPES, refused, strict=True):
        assert error, (arguments, reply)
        assert "root:" not in reply, (arguments, reply)
        assert reply.startswith("source: ") and "knowledge.allow_paths" in reply, reply
    assert allowed == (False, allowed[1]) and "rotates every quarter" in allowed[1]


def test_allow_paths_opens_a_directory_and_roots_replace_the_cwd(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = _project(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "guide.md").write_text("# Guide\n\nShared guide text about onboarding.\n")
    monkeypatch.chdir(project)
    pool = pool_for(tmp_path / "db", allow_paths=(str(shared),))
    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(shared / "guide.md"), "scope": ""},
        {"command": "read", "source": str(OUTSIDE), "scope": ""},
    ]
    (ok, guide), (refused, _) = _knowledge_replies(server, calls)
    assert not ok and "onboarding" in guide
    assert refused

    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nText in the client's root directory.\n")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=other.as_uri())])  # type: ignore[arg-type]

    server = build_server(pool, workspace(project))
    calls = [
        {"command": "read", "source": str(other / "x.md")},
        {"command": "read", "source": str(project / "notes.md")},
    ]
    (in_root, text), (cwd_refused, reply) = _knowledge_replies(
        server, calls, list_roots_callback=roots
    )
    assert not in_root and "client's root" in text
    assert cwd_refused and "knowledge.allow_paths" in reply


def test_an_http_server_reads_no_local_file_unless_configured(
    tmp_path: Path, monkeypatch: Any
) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    remote = dataclasses.replace(workspace(project, PROJECT_A), http=True)
    server = build_server(pool_for(tmp_path / "db"), remote)
    [(error, reply)] = _knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert error and "no local directory" in reply and "knowledge.allow_paths" in reply
    server = build_server(pool_for(tmp_path / "db2", allow_paths=(str(project),)), remote)
    [(error, reply)] = _knowledge_replies(server, [{"command": "read", "source": "notes.md"}])
    assert not error and "rotates every quarter" in reply
