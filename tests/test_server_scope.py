"""Scope locking: by session capability, by roots, by the server's cwd; global memories."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from octobrain.server import BrainPool, Workspace
from octobrain.server.app import build_server
from tests.server_support import (
    PROJECT_A,
    PROJECT_B,
    advertise_session,
    call,
    hash_pool,
    memory_id,
    run,
    server_for,
)

SECRET = {
    "title": "Billing secret",
    "content": "The billing service signs invoices with the ledger key rotation scheme.",
}


def _git_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


async def _tool_names_with_scope(client: Client) -> set[str]:
    tools = (await client.list_tools()).tools
    return {t.name for t in tools if "scope" in t.input_schema["properties"]}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_session_capability_locks_the_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    pool = hash_pool(tmp_path / "db")
    other = server_for(pool, tmp_path)  # unlocked: writes wherever `scope` says
    server = server_for(pool, tmp_path)

    async def body() -> None:
        async with Client(other, mode=mode) as client:
            error, reply = await call(client, "memorize", **SECRET, scope=PROJECT_B)
            assert not error, reply
            secret = memory_id(reply)
        advertise_session(
            monkeypatch, {"scope": PROJECT_A, "role": "dev", "session_id": "s1", "git": True}
        )
        async with Client(server, mode=mode) as client:
            assert await _tool_names_with_scope(client) == set()
            error, reply = await call(client, "memorize", title="Local fact", content="x" * 20)
            assert not error and f"Scope: {PROJECT_A}" in reply
            # Passing another project's scope is refused, not honoured.
            error, reply = await call(client, "remember", query="ledger key", scope=PROJECT_B)
            assert error and reply.startswith("scope: this session is locked to")
            error, reply = await call(client, "remember", query="billing ledger key rotation")
            assert not error and secret not in reply
            error, reply = await call(client, "forget", memory_id=secret, confirm=True)
            assert error and "no memory" in reply
        monkeypatch.undo()
        async with Client(other, mode=mode) as client:
            _, reply = await call(client, "remember", query="ledger key rotation", scope=PROJECT_B)
            assert secret in reply, "the locked session could not delete it"

    run(body)


def test_roots_lock_the_scope(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    pool = hash_pool(tmp_path / "db")
    asked = []

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(
            roots=[
                types.Root(uri=repo.as_uri()),  # type: ignore[arg-type]
                types.Root(uri=(tmp_path / "other").as_uri()),  # type: ignore[arg-type]
            ]
        )

    async def body() -> None:
        async with Client(server_for(pool, tmp_path), mode="legacy") as client:
            await call(client, "memorize", **SECRET, scope=PROJECT_A)
        async with Client(
            server_for(pool, tmp_path), mode="legacy", list_roots_callback=roots
        ) as client:
            assert await _tool_names_with_scope(client) == set()
            error, reply = await call(client, "memorize", title="Web fact", content="y" * 20)
            assert not error and f"Scope: {PROJECT_B}" in reply, reply
            _, reply = await call(client, "remember", query="billing ledger key rotation")
            assert "Billing secret" not in reply
            error, reply = await call(client, "remember", query="ledger", scope=PROJECT_A)
            assert error and "locked" in reply
        assert len(asked) == 1, "roots are asked once per connection"

    run(body)


def test_cwd_git_repo_locks_the_scope(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "api", "git@github.com:acme/api.git")
    workspace = Workspace.scan(repo)
    assert workspace.cwd_lock is not None and workspace.cwd_lock.scope == PROJECT_A
    server = build_server(hash_pool(tmp_path / "db"), workspace)

    async def body() -> None:
        async with Client(server) as client:
            assert await _tool_names_with_scope(client) == set()
            assert PROJECT_A in (client.instructions or "")
            _, reply = await call(client, "memorize", title="Api fact", content="z" * 20)
            assert f"Scope: {PROJECT_A}" in reply

    run(body)


def test_unlocked_instructions_list_the_scopes_found(tmp_path: Path) -> None:
    _git_repo(tmp_path / "api", "git@github.com:acme/api.git")
    _git_repo(tmp_path / "web", "https://github.com/acme/web")
    workspace = Workspace.scan(tmp_path)
    assert workspace.cwd_lock is None
    server = build_server(hash_pool(tmp_path / "db"), workspace)

    async def body() -> None:
        async with Client(server, mode="legacy") as client:
            text = client.instructions or ""
            assert "Available project scopes" in text
            assert PROJECT_A in text and PROJECT_B in text
            assert await _tool_names_with_scope(client) == {
                "memorize",
                "remember",
                "forget",
                "knowledge",
                "ingest",
            }

    run(body)


def test_global_memory_is_stored_globally_and_seen_from_two_projects(tmp_path: Path) -> None:
    pool: BrainPool = hash_pool(tmp_path / "db")

    async def body() -> None:
        async with Client(server_for(pool, tmp_path, PROJECT_A)) as client:
            error, reply = await call(
                client,
                "memorize",
                title="User prefers tabs",
                content="The user wants tabs, never spaces, in every project.",
                memory_type="user_preference",
                source="user_confirmed",
                **{"global": True},
            )
            assert not error and "Scope: (global)" in reply
            shared = memory_id(reply)
            _, reply = await call(client, "memorize", **SECRET)
            private = memory_id(reply)
        for project in (PROJECT_A, PROJECT_B):
            async with Client(server_for(pool, tmp_path, project)) as client:
                _, reply = await call(
                    client, "remember", query=["tabs spaces", "ledger key rotation"], limit=10
                )
                assert shared in reply, project
                assert (private in reply) == (project == PROJECT_A), project

    run(body)
    # Stored with the global scope itself, not stamped with the session's project.
    stored = pool.call("", None, lambda brain: brain.recent(10))
    assert [m.scope for m in stored] == [""]


def test_roots_lock_the_scope_under_the_current_protocol(tmp_path: Path) -> None:
    """2026-07-28 has no server-to-client requests: a tool call from a client with the roots
    capability gets an InputRequiredResult asking for them, and the retry is locked."""
    repo = _git_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    pool = hash_pool(tmp_path / "db")
    asked = []

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    async def body() -> None:
        async with Client(server_for(pool, tmp_path), mode="legacy") as client:
            await call(client, "memorize", **SECRET, scope=PROJECT_A)
        async with Client(server_for(pool, tmp_path), list_roots_callback=roots) as client:
            error, reply = await call(client, "memorize", title="Web fact", content="y" * 20)
            assert not error and f"Scope: {PROJECT_B}" in reply, reply
            error, reply = await call(client, "remember", query="billing ledger key rotation")
            assert not error and "Billing secret" not in reply
            # The session's own scope is accepted as if it were left out; another is refused.
            error, reply = await call(client, "remember", query="web fact", scope=PROJECT_B)
            assert not error and "Web fact" in reply, reply
            error, reply = await call(client, "remember", query="ledger", scope=PROJECT_A)
            assert error and "locked" in reply
            read = await client.read_resource("octobrain://brief")  # resources ask the same way
            assert read.contents[0].text.startswith(f"# Memory briefing: {PROJECT_B}")  # type: ignore[union-attr]
        assert len(asked) == 5, "stateless: asked once per call"
        async with Client(server_for(pool, tmp_path)) as client:  # no roots capability
            error, reply = await call(client, "remember", query="ledger", scope=PROJECT_A)
            assert not error and "Billing secret" in reply

    run(body)


def test_a_roots_scope_is_asked_of_git_once_a_minute_not_at_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under 2026-07-28 the roots come with every call, and each call ran git (one or two
    # processes) to derive the same scope again. A remote changed is seen within the minute.
    from octobrain.server import scoping

    repo = _git_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    asked: list[Path] = []
    derive = scoping.derive_scope

    def counted(path: Path) -> str:
        asked.append(path)
        return derive(path)

    monkeypatch.setattr(scoping, "derive_scope", counted)
    monkeypatch.setattr(scoping, "_root_scopes", type(scoping._root_scopes)())
    clock = [1000.0]
    monkeypatch.setattr(scoping, "_clock", lambda: clock[0])
    for _ in range(5):
        lock = scoping.lock_from_roots([repo.as_uri()])
        assert lock is not None and lock.scope == PROJECT_B
    assert asked == [repo]
    subprocess.run(
        ["git", "-C", str(repo), "remote", "set-url", "origin", "https://github.com/acme/api.git"],
        check=True,
    )
    clock[0] += scoping.ROOT_SCOPE_SECS
    lock = scoping.lock_from_roots([repo.as_uri()])
    assert lock is not None and lock.scope == PROJECT_A and asked == [repo, repo]


def test_a_client_whose_calls_may_be_locked_by_roots_is_shown_a_way_to_store_globally(
    tmp_path: Path,
) -> None:
    """On 2026-07-28 `tools/list` cannot ask for roots, so it cannot tell whether the calls
    will be locked. Before, it showed the unlocked form (scope required, no `global`), whose
    advice (scope '') every locked call refused: no way to store a global memory was shown."""
    repo = _git_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    pool = hash_pool(tmp_path / "db")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    async def body() -> None:
        async with Client(server_for(pool, tmp_path), list_roots_callback=roots) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            memorize = tools["memorize"]
            assert {"scope", "global"} <= set(memorize["properties"])
            assert "scope" not in memorize["required"]
            for how in ({"scope": ""}, {"global": True}):
                error, reply = await call(
                    client, "memorize", title="Tabs please", content="x" * 20, **how
                )
                assert not error and "Scope: (global)" in reply, (how, reply)
            error, reply = await call(client, "memorize", title="Web fact", content="y" * 20)
            assert not error and f"Scope: {PROJECT_B}" in reply, reply
            error, reply = await call(
                client,
                "memorize",
                title="Tabs again",
                content="z" * 20,
                scope="",
                **{"global": False},
            )
            assert error and reply.startswith('global: false contradicts scope ""'), reply
            error, reply = await call(
                client, "memorize", title="Tabs again", content="z" * 20, scope=PROJECT_B,
                **{"global": True},
            )  # fmt: skip
            assert error and reply.startswith("global: true contradicts scope"), reply
        async with Client(server_for(pool, tmp_path)) as client:  # unlocked: either way too
            # Before: "/" or blanks were the global scope by another name; `global: false`
            # beside scope '' stored globally.
            for odd in ("/", "   "):
                error, reply = await call(
                    client, "memorize", title="Private api fact", content="u" * 20, scope=odd
                )
                assert error and reply.startswith("scope: must name a project"), reply
            error, reply = await call(
                client, "memorize", title="Tabs again", content="t" * 20, scope="",
                **{"global": False},
            )  # fmt: skip
            assert error and reply.startswith('global: false contradicts scope ""'), reply
            error, reply = await call(client, "remember", query="tabs", **{"global": True})
            assert error and reply.startswith("global: this tool takes no global"), reply
            error, reply = await call(client, "remember", query="tabs", **{"x\nIGNORE\ny": 1})
            assert error and "\n" not in reply and "unknown parameter" in reply, reply
            error, reply = await call(
                client, "memorize", title="Spaces please", content="w" * 20, **{"global": True}
            )
            assert not error and "Scope: (global)" in reply, reply
            error, reply = await call(
                client,
                "memorize",
                title="Spaces again",
                content="v" * 20,
                scope=PROJECT_A,
                **{"global": True},
            )
            assert error and reply.startswith("global: true contradicts scope"), reply

    run(body)


def test_a_client_naming_a_new_scope_on_every_call_keeps_the_pool_bounded(tmp_path: Path) -> None:
    from octobrain.server.pool import SCOPES_KEPT

    pool: BrainPool = hash_pool(tmp_path / "db")
    first = "github.com/acme/scope-0"
    pool.call(first, None, lambda b: b.memorize("Ledger key", "Rotate the ledger key monthly."))
    for n in range(1, SCOPES_KEPT + 40):
        pool.call(f"github.com/acme/scope-{n}", None, lambda b: b.recent(1))
    assert len(pool._brains) <= SCOPES_KEPT
    # A scope dropped from the pool is rebuilt when named again, with all it holds.
    found = pool.call(first, None, lambda b: b.remember("ledger key rotation", min_relevance=0))
    assert [h.memory.title for h in found.hits] == ["Ledger key"]


@pytest.mark.parametrize(
    ("session", "rule"),
    [
        ({"session_id": "s\x00" + "x" * 900_000}, "experimental.session.session_id: must not"),
        ({"session_id": "s1\x1b]0;pwned\x07"}, "experimental.session.session_id: must not"),
        ({"session_id": "x" * 300}, "experimental.session.session_id: must be 0–256 bytes"),
        ({"session_id": 7}, "experimental.session.session_id: must be a string"),
        ({"role": "dev\nops"}, "experimental.session.role: must not contain control"),
    ],
)
def test_a_session_id_or_role_a_client_names_is_checked_like_any_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: dict[str, Any], rule: str
) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path)
    advertise_session(monkeypatch, {"scope": PROJECT_A, **session})

    async def body() -> None:
        async with Client(server, mode="legacy") as client:
            error, reply = await call(client, "memorize", title="Local fact", content="x" * 20)
            assert error and reply.startswith(rule), reply[:300]
            error, reply = await call(client, "remember", query="local fact")
            assert error and reply.startswith(rule)

    run(body)


@pytest.mark.parametrize(
    ("scope", "got"),
    [([PROJECT_B], "array"), ({"name": PROJECT_B}, "object"), (7, "integer"), (True, "boolean")],
)
def test_a_scope_capability_not_a_string_is_refused_not_the_cwds_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scope: Any, got: str
) -> None:
    # The server runs in PROJECT_A's checkout; the client names its project in a shape the
    # server cannot read. Its writes went to PROJECT_A as if it had named none.
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, locked_to=PROJECT_A)
    advertise_session(monkeypatch, {"scope": scope, "session_id": "s1"})
    rule = f"experimental.session.scope: must be a string, got {got}"  # (JSON's names)

    async def body() -> None:
        async with Client(server, mode="legacy") as client:
            error, reply = await call(client, "memorize", title="Local fact", content="x" * 20)
            assert error and reply == rule, reply
            error, reply = await call(client, "remember", query="local fact")
            assert error and reply == rule, reply

    run(body)
    found = pool.call(PROJECT_A, None, lambda b: b.remember("local fact", min_relevance=0))
    assert not found.hits


@pytest.mark.parametrize(
    ("session", "got"),
    [(PROJECT_B, "string"), (["scope", PROJECT_B], "array"), (7, "integer"), (True, "boolean")],
)
def test_a_session_capability_not_an_object_is_refused_not_the_cwds_project(
    session: Any, got: str
) -> None:
    # `experimental.session` given as the scope itself (or another shape, sent raw: the SDK
    # client will not): it was taken as naming nothing, and the session's writes went to the
    # server's working-directory project. Every call of such a session is refused so, as one
    # with a malformed `scope` is (the test above).
    from octobrain.errors import InvalidInput
    from octobrain.server.scoping import lock_from_capability

    with pytest.raises(InvalidInput) as refused:
        lock_from_capability({"session": session})
    assert str(refused.value) == (
        f"experimental.session: must be an object ({{scope, role, session_id, git}}), got {got}"
    )
    assert lock_from_capability({"other": PROJECT_B}) is None  # (another capability)


def test_roots_answered_late_once_lock_the_sessions_later_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One `roots/list` answered after the timeout (a busy client) was kept as "no roots" for
    # the whole connection: every later call ran unlocked (or in the server's cwd project).
    from octobrain.server import roots as roots_asked

    monkeypatch.setattr(roots_asked, "ROOTS_TIMEOUT_SECS", 0.5)
    repo = _git_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    pool = hash_pool(tmp_path / "db")
    slow = [True]

    async def roots(context: Any) -> types.ListRootsResult:
        if slow:  # the first answer comes past the timeout: that call is not locked by roots
            slow.pop()
            await anyio.sleep(2)
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    async def body() -> None:
        async with Client(
            server_for(pool, tmp_path), mode="legacy", list_roots_callback=roots
        ) as client:
            error, reply = await call(client, "memorize", title="Web fact", content="y" * 20)
            assert error and reply.startswith("scope: required"), reply
            error, reply = await call(client, "memorize", title="Web fact", content="y" * 20)
            assert not error and f"Scope: {PROJECT_B}" in reply, reply

    run(body)


@pytest.mark.parametrize("remote", [False, True])
def test_roots_of_a_client_on_another_machine_are_not_looked_up_here(
    tmp_path: Path, remote: bool
) -> None:
    # Over a non-loopback bind a client's roots are paths on its own machine. The server ran
    # git in the directory the root named on its own disk and told the client that
    # directory's remote (`Scope: github.com/acme/web`): any of its repositories, by path.
    repo = _git_repo(tmp_path / "srv" / "web", "https://github.com/Acme/Web.git")
    server = build_server(
        hash_pool(tmp_path / "db"), Workspace(tmp_path, None, [], http=True, remote=remote)
    )

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    async def body() -> str:
        async with Client(server, mode="legacy", list_roots_callback=roots) as client:
            error, reply = await call(client, "memorize", **SECRET)
            assert not error, reply
            return reply

    reply = anyio.run(body)
    assert reply.endswith("Scope: local/srv/web" if remote else f"Scope: {PROJECT_B}"), reply
