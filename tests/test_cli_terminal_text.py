"""What `octobrain memory` prints of a stored memory that holds what a terminal acts on:
escape and C1 codes, bidirectional overrides. Stored and exported as written; printed so
that nothing in it drives the terminal or reorders the line it sits on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from tests.cli_memory_support import memorize, memory_env, run  # noqa: F401  (a fixture)


@pytest.fixture
def env(memory_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir of its own, the hash embedder, no config file."""
    return memory_env


def test_terminal_escapes_in_a_memory_are_not_printed_to_the_terminal(env: dict[str, str]) -> None:
    # A memory written by an agent can hold escapes: set the window title, write the
    # clipboard (OSC 52), disguise a link. Text output printed them raw.
    title = "Deploy \x1b]0;owned\x07notes"
    content = "Run \x1b]52;c;ZXZpbA==\x07the \x1b[2Jdeploy script with \x9bcare."
    mid = memorize(title, content)
    for args in (["recent"], ["get", mid], ["remember", "deploy script"]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert "Deploy ]0;ownednotes" in result.output
        assert not any(c in result.output for c in "\x1b\x07\x9b"), args
    data = json.loads(run("get", mid, "--format", "json").output)
    assert data["content"] == content  # stored and exported as written


def test_json_output_escapes_the_control_codes_json_leaves_raw(env: dict[str, str]) -> None:
    # JSON escapes only what is below U+0020: DEL and the C1 codes (CSI U+009B, OSC U+009D,
    # which a terminal acts on as on ESC) were printed raw by every --format json, the export
    # and the SessionStart hook. Now escaped: the same JSON, the same text read back.
    title = "Deploy \x9b2Jnotes"
    content = "Run \x9d52;c;ZXZpbA==\x9c the deploy\x7f script with care."
    mid = memorize(title, content)
    outputs = [
        run(*args).output
        for args in (
            ["get", mid, "--format", "json"],
            ["recent", "--format", "json"],
            ["remember", "deploy script", "--format", "json"],
            ["export"],
        )
    ]
    outputs.append(
        CliRunner()
        .invoke(main, ["brief", "--scope", "github.com/acme/api", "--format", "json"])
        .output
    )
    hook = json.dumps({"session_id": "s1", "cwd": str(Path.cwd()), "hook_event_name": "x"})
    started = CliRunner().invoke(
        main, ["hook", "session-start", "--scope", "github.com/acme/api"], input=hook
    )
    outputs.append(started.output)
    for output in outputs:
        assert not any(c in output for c in "\x7f\x9b\x9c\x9d"), output
        assert "\\u009b" in output or "\\u009d" in output, output
    assert json.loads(outputs[0])["content"] == content
    assert json.loads(started.output)["hookSpecificOutput"]["additionalContext"].count("\x9b") == 1


def test_json_output_escapes_bidirectional_controls(env: dict[str, str]) -> None:
    # A memory's text may hold U+202E (only titles, tags and paths refuse it): printed raw in
    # --format json (and the export), it reversed the rest of the terminal line it sat on.
    # Escaped now, as refusals write it: the same JSON, the same text read back.
    content = "Rotate the key \u202eyadnom no\u202c then the \u2066cache\u2069 too."
    mid = memorize("Key rotation", content)
    for args in (["get", mid, "--format", "json"], ["remember", "rotate key", "--format", "json"],
                 ["export"]):  # fmt: skip
        output = run(*args).output
        assert not any(c in output for c in "\u202e\u202c\u2066\u2069"), args
        assert "\\u202e" in output, args
    assert json.loads(run("get", mid, "--format", "json").output)["content"] == content


def test_text_output_shows_bidirectional_controls_instead_of_obeying_them(
    env: dict[str, str],
) -> None:
    # Printed raw, "\u202eyadnom no" showed as "on monday": the rest of the line reversed, so a
    # memory could read as another on a terminal. Shown by code point now, stored as written.
    content = "Rotate the key \u202eyadnom no\u202c then the \u2066cache\u2069 too."
    mid = memorize("Key rotation", content)
    for args in (["get", mid], ["remember", "rotate key"], ["recent"]):
        output = run(*args).output
        assert not any(c in output for c in "\u202e\u202c\u2066\u2069"), args
        assert "<U+202E>yadnom no<U+202C>" in output or args == ["recent"], (args, output)
    hook_text = "right-to-left \u05e9\u05dc\u05d5\u05dd \u200f mark"  # marks kept: RTL needs them
    mid = memorize("Hebrew", hook_text)
    assert hook_text in run("get", mid).output
    assert json.loads(run("get", mid, "--format", "json").output)["content"] == hook_text
    brief = CliRunner().invoke(main, ["brief", "--scope", "github.com/acme/api"])
    assert "\u202e" not in brief.output
