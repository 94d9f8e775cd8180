"""`octobrain memory ingest` on the command line: one-line reports and errors, the conversation
named, gzip files within the file bound."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from octobrain.config import Config, EmbeddingConfig
from octobrain.memory.brain import Brain
from tests.ingest_support import LOCOMO, SCOPE, cli, stored


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's store under `tmp_path/data`, with the hash embedder and no config file."""
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_reports_and_errors_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    first = cli("memory", "--scope", SCOPE, "ingest", str(path), "--format", "json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["added"] == 5
    second = cli("memory", "--scope", SCOPE, "ingest", str(path))
    assert "0 added, 5 already present" in second.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('[{"speaker": "A", "text": "x", "time": "noon"}]')
    failed = cli("memory", "--scope", SCOPE, "ingest", str(bad), "--format-in", "chat")
    assert failed.exit_code == 2
    assert failed.stderr.strip().startswith("error: turns[0].time: must be ISO-8601")
    assert "Traceback" not in failed.output
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps([{"speaker": "A", "text": t, "id": "x"} for t in ("a", "b")]))
    dup = cli("memory", "--scope", SCOPE, "ingest", str(twice))
    assert (dup.exit_code, dup.stdout) == (2, "")
    assert dup.stderr == (
        'error: turns[1].id: duplicate of turns[0].id ("x"), which is a different turn; '
        "a turn id must name one turn\n"
    )
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"speaker": "A", "text": "hi", "time": "2026-01-01T10:00Z"}))
    wrong = cli("memory", "--scope", SCOPE, "ingest", str(chat), "--format-in", "claude")
    assert wrong.exit_code == 0 and "ingested 0 turns" in wrong.stdout
    assert wrong.stderr.startswith(
        f"warning: {chat}: no turns found in it as claude; --format-in claude|chat|locomo|"
        "claude-ai|chatgpt|whatsapp|whatsapp-dmy|whatsapp-mdy forces a format\n"
    )
    # A device never ends and a FIFO waits for a writer: refused at once, not read.
    fifo = tmp_path / "turns.fifo"
    os.mkfifo(fifo)
    for special in ("/dev/zero", str(fifo)):
        refused = cli("memory", "--scope", SCOPE, "ingest", special)
        assert refused.exit_code == 2
        assert refused.stderr == f"error: file: {special} is not a regular file\n"


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_names_the_conversation_and_refuses_text_that_is_not_utf8(
    tmp_path: Path,
) -> None:
    # Two exports both called result.json were one conversation, "result": the second's turns
    # chained into the first's sessions. The line names the conversation, --conversation
    # gives another; a Latin-1 file was stored with U+FFFD in place of each accent.
    said = {
        "family": ("Ann", "Dinner is at the lobster place.", "2024-06-01T18:00Z"),
        "work": ("Carl", "The quarterly audit starts Monday.", "2024-06-01T18:10Z"),
    }
    chats = {k: [{"speaker": s, "text": t, "time": w}] for k, (s, t, w) in said.items()}
    for name, records in chats.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(records))
    family = cli("memory", "--scope", SCOPE, "ingest", str(tmp_path / "family" / "result.json"))
    assert "ingested 1 turn of conversation 'result' into" in family.stdout, family.output
    work_file = str(tmp_path / "work" / "result.json")
    work = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", " work ")
    assert "ingested 1 turn of conversation 'work' into" in work.stdout, work.output
    b = Brain(SCOPE, config=Config(embedding=EmbeddingConfig(model="hash:64")))
    audit = stored(b)["The quarterly audit starts Monday."]
    assert "conversation:work" in audit.tags and "lobster" not in audit.context
    again = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", "work")
    assert "0 added, 1 already present" in again.stdout
    two = tmp_path / "two.json"
    two.write_text(json.dumps([LOCOMO[0], {**LOCOMO[0], "sample_id": "other"}]))
    refused = cli("memory", "--scope", SCOPE, "ingest", str(two), "--conversation", "x")
    assert refused.stderr == f"error: conversation: names one conversation; {two} holds 2\n"
    blank = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", "  ")
    assert blank.stderr.startswith("error: conversation: must be a string of 1–")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"speaker": "A", "text": "ok"}\n{"speaker": "Zo\xeb", "text": "caf\xe9"}\n')
    refused = cli("memory", "--scope", SCOPE, "ingest", str(latin))
    assert refused.exit_code == 2 and refused.stderr == (
        "error: file: is not UTF-8 text (line 2, column 16); save it as UTF-8\n"
    )


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_reads_a_gzip_file_within_the_file_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: LoCoMo's own file is kept as .json.gz (and `bench locomo` reads it so), but
    # `memory ingest` of it said "file: is not UTF-8 text (line 1, column 2); save it as UTF-8".
    packed = tmp_path / "talk.jsonl.gz"
    lines = [{"speaker": "A", "text": f"turn {i}", "time": f"2024-06-01T18:0{i}Z"} for i in (1, 2)]
    # (two members, as `cat a.gz b.gz` makes: both read)
    packed.write_bytes(b"".join(gzip.compress(json.dumps(r).encode() + b"\n") for r in lines))
    done = cli("memory", "--scope", SCOPE, "ingest", str(packed))
    assert done.exit_code == 0, done.output
    assert "ingested 2 turns of conversation 'talk' into" in done.stdout  # not 'talk.jsonl'
    locomo = tmp_path / "locomo.json.gz"
    locomo.write_bytes(gzip.compress(json.dumps(LOCOMO).encode()))
    assert "5 added" in cli("memory", "--scope", SCOPE, "ingest", str(locomo)).stdout
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(locomo.read_bytes()[:-20])
    refused = cli("memory", "--scope", SCOPE, "ingest", str(cut))
    assert refused.exit_code == 2 and refused.stderr.startswith(
        "error: file: is gzip-compressed but cannot be inflated (it ends before its data does)"
    ), refused.output
    # Inflated, it is bound as a file is: read no further than the bound, then refused.
    monkeypatch.setattr("octobrain.memory.conversation_bytes.MAX_FILE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (8 << 20)))
    assert bomb.stat().st_size < 10_000
    refused = cli("memory", "--scope", SCOPE, "ingest", str(bomb))
    assert refused.exit_code == 2
    assert refused.stderr == "error: file: must be at most 1 MiB once inflated\n"
