"""What the `memory ingest` tests share: a LoCoMo conversation, a Claude Code transcript, a
store with the hash embedder and the turns it holds, the CLI run in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from octobrain.config import Config, EmbeddingConfig, MemoryConfig
from octobrain.memory.brain import Brain

SCOPE = "github.com/acme/chat"

LOCOMO = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I joined a pottery class."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Wow! How was it?"},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "Yeah, it was so much fun!"},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "Look at this",
                    "blip_caption": "a photo of a sunrise over a lake",
                },
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "Beautiful sunrise!"},
            ],
        },
        "qa": [],
    }
]


def claude_transcript(path: Path) -> Path:
    """A Claude Code transcript at `path`: a question, an answer with a tool call, a tool result
    and a slash command."""
    sid = "5b0e2c1a-0000-4000-8000-000000000001"
    entries: list[dict[str, Any]] = [
        {"type": "summary", "summary": "x"},
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u1",
            "timestamp": "2026-03-02T10:00:00Z",
            "message": {"role": "user", "content": "Why does the nightly export crash?"},
        },
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": "a1",
            "timestamp": "2026-03-02T10:00:05Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "The export reads a closed file handle."},
                    {"type": "tool_use", "name": "Read", "input": {"file_path": "x.py"}},
                ],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u2",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "content": "file contents"}],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u3",
            "message": {"role": "user", "content": "<command-name>/clear</command-name>"},
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return path


def brain(tmp_path: Path, **memory: Any) -> Brain:
    """A store under `tmp_path/db` in `SCOPE`, with the hash embedder and these memory settings."""
    config = Config(embedding=EmbeddingConfig(model="hash:256"), memory=MemoryConfig(**memory))
    return Brain(SCOPE, config=config, uri=tmp_path / "db")


def stored(b: Brain) -> dict[str, Any]:
    """Ingested turns by the text that was said."""
    return {m.content: m for m in b.recent(limit=1000)}


def cli(*args: str) -> Result:
    """`octobrain <args>` run in-process."""
    from octobrain.cli.main import main

    return CliRunner().invoke(main, list(args))
