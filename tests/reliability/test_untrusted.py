"""An untrusted MCP client: local files confined to the session's project, SSRF spellings, caps
on one call's work, and malformed protocol input."""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig
from octobrain.knowledge.fetch import FetchError, resolve_checked
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


# ---- SSRF: an IPv4 inside an IPv6 address is checked as that IPv4 ---------------------------

EMBEDDED_LOOPBACK = [
    "64:ff9b::7f00:1",  # NAT64
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "2002:7f00:1::1",  # 6to4
    "::7f00:1",  # IPv4-compatible
    "::ffff:7f00:1",  # IPv4-mapped
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 to the cloud metadata address
]


def _answering(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.mark.parametrize("address", EMBEDDED_LOOPBACK)
def test_an_ipv4_embedded_in_ipv6_is_checked_as_that_ipv4(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    with pytest.raises(FetchError, match=r"^source: refusing docs\.example\.com"):
        resolve_checked("docs.example.com", 443, ())


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"])
def test_ipv6_forms_of_a_public_ipv4_still_pass(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    chosen = resolve_checked("docs.example.com", 443, ())
    assert ipaddress.ip_address(chosen) == ipaddress.ip_address(address)


def test_a_url_httpx_cannot_parse_is_one_line(tmp_path: Path) -> None:
    server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path, PROJECT_A))
    [(error, reply)] = _knowledge_replies(
        server, [{"command": "read", "source": "http://0177.0.0.1/"}]
    )
    assert error and reply.startswith("source: http://0177.0.0.1") and "\n" not in reply, reply
