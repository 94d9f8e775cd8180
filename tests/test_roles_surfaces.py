"""Roles where users give them: `octobrain memory --role R …` at the command line, and an MCP
session whose `experimental.session` names a role (over real stdio, with the SDK's client)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from mcp import Client

from octobrain.cli.launch import routable
from octobrain.cli.main import main
from octobrain.memory.gist import DIGEST_TAG
from octobrain.scope import derive_scope
from tests.cli_memory_support import memory_env
from tests.hooks_support import hook_json, transcript
from tests.server_support import PROJECT_A, advertise_session, call, run
from tests.server_transports_support import stdio_params
from tests.service_support import SCOPE, assert_same_output, cli, served_count, start_service
from tests.service_support import env as env  # (the `env` fixture)

__all__ = ["memory_env"]

REVIEW = ("Review checklist for deploys", "Reviewers check the deploy rollback plan first.")
PLAN = ("Deploy planning cadence", "Planners schedule each deploy two days ahead of time.")


def _memory(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", "--scope", PROJECT_A, *args])


def _run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


def _found(*role: str) -> list[str]:
    listed = _memory(*role, "remember", "deploy", "--min-relevance", "0", "--format", "json")
    assert listed.exit_code == 0, listed.output
    return sorted(hit["title"] for hit in json.loads(listed.stdout)["results"])


def test_the_cli_s_role_stores_and_reads_that_role_s_memories(memory_env: dict[str, str]) -> None:
    for role, (title, content) in (("reviewer", REVIEW), ("planner", PLAN)):
        done = _memory("--role", role, "memorize", "-t", title, "-c", content)
        assert done.exit_code == 0, done.output
    assert _found("--role", "reviewer") == [REVIEW[0]]
    assert _found("--role", "planner") == [PLAN[0]]
    assert _found() == sorted([REVIEW[0], PLAN[0]])  # no role: every role's
    stats = json.loads(_memory("--role", "planner", "stats", "--format", "json").stdout)
    assert (stats["total"], stats["role"]) == (1, "planner")
    bad = _memory("--role", "a\nb", "recent")
    assert bad.exit_code == 2 and "--role: must not contain control" in bad.output
    whole = CliRunner().invoke(main, ["memory", "--role", "planner", "history"])
    assert whole.exit_code == 2 and "takes no --role" in whole.output


def test_an_mcp_session_s_role_keeps_its_memories_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The capability's role was validated and kept, but nothing was written or read by it:
    # every session saw every role's memories.
    server = stdio_params(tmp_path / "data", tmp_path)

    async def session(role: str, memorize: tuple[str, str] | None = None) -> str:
        advertise_session(monkeypatch, {"scope": PROJECT_A, "role": role} if role else {})
        async with Client(server, mode="legacy") as client:
            scope = {} if role else {"scope": PROJECT_A}
            if memorize is not None:
                error, reply = await call(client, "memorize", title=memorize[0],
                                          content=memorize[1], **scope)  # fmt: skip
                assert not error, reply
            error, reply = await call(client, "remember", query="deploy", min_relevance=0.0,
                                      **scope)  # fmt: skip
            assert not error, reply
            return reply

    async def body() -> None:
        await session("reviewer", REVIEW)
        await session("planner", PLAN)
        reviewer = await session("reviewer")
        assert REVIEW[0] in reviewer and PLAN[0] not in reviewer, reviewer
        planner = await session("planner")
        assert PLAN[0] in planner and REVIEW[0] not in planner, planner
        everyone = await session("")
        assert REVIEW[0] in everyone and PLAN[0] in everyone, everyone

    run(body)


def test_the_resident_service_answers_a_role_s_commands_as_its_own_process_does(
    env: dict[str, str],
) -> None:
    assert routable(["memory", "--role", "planner", "--scope", "x/y", "remember", "q"])
    start_service(env)
    for role, (title, content) in (("reviewer", REVIEW), ("planner", PLAN)):
        done = cli(env, "memory", "--role", role, "--scope", SCOPE, "memorize", "-t", title,
                   "-c", content)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert served_count() == 2
    remember = ["memory", "--role", "planner", "--scope", SCOPE, "remember", "deploy",
                "--min-relevance", "0", "--format", "json"]  # fmt: skip
    # (A first recall counts an access, which raises the memory's decayed importance; the
    # access window then counts repeats once, so both paths below see the same state.)
    found = json.loads(cli(env, *remember, service=False).stdout)["results"]
    assert [hit["title"] for hit in found] == [PLAN[0]]
    assert_same_output(env, [(remember, "")])
    assert served_count() == 3


def test_brief_and_the_hooks_read_and_write_as_their_role(
    memory_env: dict[str, str], tmp_path: Path
) -> None:
    # `brief` and `hook …` took no --role: a planner's session-start briefing showed the
    # reviewer's memories, and its session digest was stored role-less, read by every role.
    project = tmp_path / "proj"
    project.mkdir()
    scope = derive_scope(project)
    for role, (title, content) in (("reviewer", REVIEW), ("planner", PLAN)):
        done = _run("memory", "--role", role, "--scope", scope, "memorize", "-t", title,
                       "-c", content)  # fmt: skip
        assert done.exit_code == 0, done.output
    briefed = _run("brief", "--scope", scope, "--role", "planner")
    assert briefed.exit_code == 0 and PLAN[0] in briefed.output, briefed.output
    assert REVIEW[0] not in briefed.output
    start = hook_json("SessionStart", project, tmp_path / "none.jsonl")
    started = _run("hook", "session-start", "--role", "reviewer", input=start)
    assert REVIEW[0] in started.output and PLAN[0] not in started.output, started.output
    said = hook_json("SessionEnd", project, transcript(tmp_path / "t.jsonl", project))
    ended = _run("hook", "session-end", "--role", "planner", input=said)
    assert "digest stored" in ended.output, ended.output

    def digests(*role: str) -> int:
        listed = _run("memory", *role, "--scope", scope, "recent", "--format", "json")
        assert listed.exit_code == 0, listed.output
        return sum(DIGEST_TAG in hit["tags"] for hit in json.loads(listed.stdout))

    assert (digests("--role", "planner"), digests("--role", "reviewer"), digests()) == (1, 0, 1)
    bad = _run("brief", "--role", "a\nb")
    assert bad.exit_code == 2 and "--role: must not contain control" in bad.output


def test_the_resident_service_briefs_a_role_as_its_own_process_does(env: dict[str, str]) -> None:
    assert routable(["brief", "--role", "planner", "--scope", SCOPE])
    start_service(env)
    for role, (title, content) in (("reviewer", REVIEW), ("planner", PLAN)):
        done = cli(env, "memory", "--role", role, "--scope", SCOPE, "memorize", "-t", title,
                   "-c", content)  # fmt: skip
        assert done.returncode == 0, done.stderr
    brief = ["brief", "--role", "planner", "--scope", SCOPE]
    shown = cli(env, *brief, service=False).stdout.decode()
    assert PLAN[0] in shown and REVIEW[0] not in shown, shown
    assert_same_output(env, [(brief, "")])
