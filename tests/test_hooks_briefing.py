"""The briefing: `octobrain hook session-start`, `octobrain brief` (markdown and JSON), and the
MCP prompt and resource."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from octobrain.memory.gist import DIGEST_TAG
from octobrain.scope import derive_scope
from tests.hooks_support import SESSION, brain_for, cli, hook_json
from tests.hooks_support import env as env  # the fixture, shared
from tests.server_support import PROJECT_A, briefed_pool, run, server_for


def test_session_start_prints_the_briefing_as_additional_context(env: Path) -> None:
    brain = brain_for(env)
    brain.memorize(
        "Use ruff",
        "Lint and format with ruff; no black, no isort.",
        memory_type="decision",
        source="user_confirmed",
    )
    payload = json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": str(env),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    )
    result = cli("hook", "session-start", input=payload)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = out["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(f"# Memory briefing: {derive_scope(env)}") and "Use ruff" in context


def test_brief_command_markdown_and_json(env: Path) -> None:
    brain = brain_for(env)
    brain.memorize(
        "Use ruff", "Lint and format with ruff; no black, no isort.", memory_type="decision"
    )
    scope = derive_scope(env)
    md = cli("brief", "--scope", scope)
    assert md.exit_code == 0 and "## What is true about this project" in md.output
    js = cli("brief", "--scope", scope, "--format", "json", "--max-tokens", "200")
    data = json.loads(js.output)
    assert data["max_tokens"] == 200 and data["tokens"] <= 200
    assert data["sections"][0]["items"][0]["title"] == "Use ruff"
    bad = cli("brief", "--scope", scope, "--max-tokens", "5")
    assert bad.exit_code == 2 and "max_tokens: must be an integer in [50, 100000]" in bad.output


def test_a_digest_s_points_read_as_sentences_in_the_briefing(env: Path, tmp_path: Path) -> None:
    # Points said without a full stop ran together on the briefing's line ("… we decided that
    # last week Here is the receipt …"); the stored digest keeps them as they were said.
    said = [
        ("user", "We decided that last week\nHere is the receipt we decided to keep"),
        ("assistant", "We chose blue-green deploys\nFixed the flaky export by pinning the clock"),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"type": who, "message": {"role": who, "content": text}})
            for who, text in said
        )
        + "\n"
    )
    ended = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert ended.exit_code == 0 and "digest stored" in ended.output, ended.output
    [stored] = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert stored.content == (
        "Decisions:\n- We decided that last week\n- Here is the receipt we decided to keep\n"
        "- We chose blue-green deploys\n\n"
        "Errors fixed:\n- Fixed the flaky export by pinning the clock"
    )
    points = (
        "Decisions: We decided that last week. Here is the receipt we decided to keep. "
        "We chose blue-green deploys. Errors fixed: Fixed the flaky export by pinning the clock"
    )
    scope = derive_scope(env)
    assert f"** [INFERRED] — {points} _(workflow" in cli("brief", "--scope", scope).output
    data = json.loads(cli("brief", "--scope", scope, "--format", "json").output)
    assert [i["text"] for s in data["sections"] for i in s["items"]] == [points]
    start = cli("hook", "session-start", input=hook_json("SessionStart", env, path))
    assert points in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]


# ---- MCP prompt and resource ----------------------------------------------------------------


def test_mcp_prompt_and_resource_brief_the_locked_scope(tmp_path: Path) -> None:
    pool = briefed_pool(tmp_path / "db")
    pool.call(
        "github.com/acme/other",
        None,
        lambda b: b.memorize(
            "Other project fact", "Only the other project knows this.", memory_type="decision"
        ),
    )
    server = server_for(pool, tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["brief"]
            prompt = await client.get_prompt("brief", {"max_tokens": "300"})
            text = prompt.messages[0].content.text  # type: ignore[union-attr]
            assert "Use ruff" in text and "Other project" not in text
            resources = await client.list_resources()
            assert [str(r.uri) for r in resources.resources] == ["octobrain://brief"]
            read = await client.read_resource("octobrain://brief")
            content = read.contents[0]
            assert content.mime_type == "text/markdown"
            assert "Use ruff" in content.text  # type: ignore[union-attr]
            with pytest.raises(Exception, match="scope"):
                await client.get_prompt("brief", {"scope": "github.com/acme/other"})
            # An unknown parameter named nothing it takes; a 5,000-digit value came back whole;
            # int() took other scripts' digits ("١٢٣").
            with pytest.raises(Exception, match="x: unknown parameter; the briefing takes max_"):
                await client.read_resource("octobrain://brief?x=1")
            for value in ("9" * 5_000, "١٢٣", "1e3"):
                with pytest.raises(Exception, match="max_tokens: must be an integer") as refused:
                    await client.get_prompt("brief", {"max_tokens": value})
                assert len(str(refused.value)) < 300, str(refused.value)

    run(body)
