"""The briefing as an MCP resource: listed, its template listed, read from what the template
names."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server_support import PROJECT_A, briefed_pool, run, server_for


def test_a_locked_session_lists_the_briefing_template_without_scope(tmp_path: Path) -> None:
    """`resources/templates/list` was -32601 Method not found, on a server that declares
    resources: a client that lists templates got an error."""
    server = server_for(briefed_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            listed = await client.list_resource_templates()
            (template,) = listed.resource_templates
            assert template.uri_template == "octobrain://brief{?max_tokens}"
            assert template.mime_type == "text/markdown"
            # (the prompt listed a `scope` argument its own description says a locked session
            # does not take: a client offering it asked the user for a scope to no effect)
            (prompt,) = (await client.list_prompts()).prompts
            assert [a.name for a in prompt.arguments or []] == ["max_tokens"]
            read = await client.read_resource("octobrain://brief?max_tokens=300")
            assert "Use ruff" in read.contents[0].text  # type: ignore[union-attr]

    run(body)


def test_an_unlocked_session_lists_the_scope_the_read_needs(tmp_path: Path) -> None:
    server = server_for(briefed_pool(tmp_path / "db"), tmp_path)

    async def body() -> None:
        async with Client(server) as client:
            (template,) = (await client.list_resource_templates()).resource_templates
            assert template.uri_template == "octobrain://brief{?scope,max_tokens}"
            assert "scope" in (template.description or "")
            (prompt,) = (await client.list_prompts()).prompts
            assert [a.name for a in prompt.arguments or []] == ["scope", "max_tokens"]
            # The template expanded as RFC 6570 expands it.
            read = await client.read_resource(f"octobrain://brief?scope={PROJECT_A}&max_tokens=300")
            assert "Use ruff" in read.contents[0].text  # type: ignore[union-attr]

    run(body)


def test_an_unlocked_session_reads_the_briefing_it_lists(tmp_path: Path) -> None:
    # `resources/list` named `octobrain://brief`, and reading it as listed was an error
    # ("scope: required"): a client that shows listed resources could not open it.
    pool = briefed_pool(tmp_path / "db")
    pool.call("", None, lambda b: b.memorize("Answer tersely", "The user wants short answers."))
    server = server_for(pool, tmp_path)

    async def body() -> None:
        async with Client(server) as client:
            (listed,) = (await client.list_resources()).resources
            text = (await client.read_resource(str(listed.uri))).contents[0].text  # type: ignore[union-attr]
            assert "Answer tersely" in text and "Use ruff" not in text  # the global scope's
            prompt = await client.get_prompt("brief")
            assert prompt.messages[0].content.text == text  # type: ignore[union-attr]

    run(body)


def test_a_parameter_named_twice_in_the_query_is_refused_naming_it(tmp_path: Path) -> None:
    # The last one counted: `max_tokens=5&max_tokens=6` read 6 where whatever keeps the first
    # (a proxy, an approval prompt) read 5, as with a key named twice in a JSON message.
    server = server_for(briefed_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            with pytest.raises(MCPError, match='^uri: the query names "max_tokens" twice') as e:
                await client.read_resource("octobrain://brief?max_tokens=5&max_tokens=100000")
            assert e.value.error.code == -32602
            read = await client.read_resource("octobrain://brief?max_tokens=100000")
            assert "Use ruff" in read.contents[0].text  # type: ignore[union-attr]

    run(body)
