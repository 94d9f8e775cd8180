"""What the hook tests share: a project directory and data dir for the CLI, the CLI run in-process,
the project's Brain, a Claude Code transcript and the hook JSON that names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from octobrain.config import load_config
from octobrain.memory.brain import Brain
from octobrain.scope import derive_scope

SESSION = "9f0c2a4e-51b7-4c1e-8d0a-3f2b6c7d8e90"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    return project


def cli(*args: str, input: str | None = None) -> Result:
    from octobrain.cli.main import main

    return CliRunner().invoke(main, list(args), input=input)


def brain_for(project: Path, session_id: str = "") -> Brain:
    return Brain(derive_scope(project), config=load_config(), session_id=session_id)


def transcript(path: Path, project: Path) -> Path:
    """A Claude Code JSONL transcript: user text, assistant text + tool_use, tool results."""
    entries: list[dict[str, Any]] = [
        {"type": "summary", "summary": "Fixing the export", "leafUuid": "x"},
        {
            "type": "user",
            "sessionId": SESSION,
            "cwd": str(project),
            "message": {"role": "user", "content": "The nightly export crashes, please look."},
        },
        {
            "type": "assistant",
            "sessionId": SESSION,
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me run the tests first."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "pytest -q tests/test_export.py"},
                    },
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": "TypeError: can't compare offset-naive and offset-aware",
                        "is_error": True,
                    }
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "The root cause is naive datetimes from the importer. "
                        "We decided to normalise all timestamps to UTC at the boundary.",
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "Edit",
                        "input": {
                            "file_path": str(project / "src" / "export.py"),
                            "old_string": "a",
                            "new_string": "b",
                        },
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_03",
                        "name": "Write",
                        "input": {
                            "file_path": str(project / "tests" / "test_tz.py"),
                            "content": "",
                        },
                    },
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Fixed: the export test now passes."}],
            },
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    return path


def hook_json(event: str, project: Path, transcript_path: Path, **extra: str) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript_path),
            "cwd": str(project),
            "hook_event_name": event,
            **extra,
        }
    )
