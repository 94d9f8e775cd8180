"""The command line as a script drives it: a stdout whose encoding lacks characters, a SIGTERM
in the middle of a long command, and `-` for standard input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli_exit import env as cli_env  # noqa: F401  (the `env` fixture)
from tests.test_ingest import claude_transcript

SCOPE = ["memory", "--scope", "github.com/acme/api"]
TITLE = "Café über naïve ✓ 日本 😀"


def octobrain(
    *args: str, env: dict[str, str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "octobrain", *args],
        input=stdin, capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def env(cli_env: dict[str, str]) -> dict[str, str]:  # noqa: F811
    """A data dir of its own, commands run in-process (the service off)."""
    return cli_env


def test_a_latin1_stdout_gets_what_it_cannot_spell_escaped(env: dict[str, str]) -> None:
    made = octobrain(*SCOPE, "memorize", "-t", TITLE, "-c", "Postgres 16 is the database ✓.",
                     "--format", "json", env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    latin1 = {**env, "PYTHONIOENCODING": "latin-1"}
    got = octobrain(*SCOPE, "get", json.loads(made.stdout)["id"], "--format", "json", env=latin1)
    assert got.returncode == 0 and b"Traceback" not in got.stderr, got.stderr
    assert json.loads(got.stdout.decode("latin-1"))["title"] == TITLE  # é as itself, ✓ escaped
    shown = octobrain(*SCOPE, "recent", env=latin1)
    assert shown.returncode == 0 and b"Traceback" not in shown.stderr, shown.stderr
    assert "Café über naïve \\u2713 日本".replace("日本", "\\u65e5\\u672c") in shown.stdout.decode(
        "latin-1"
    )
    # An export to stdout is the file `import` reads: UTF-8, whatever the stream's encoding.
    exported = octobrain(*SCOPE, "export", "-", env=latin1)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.decode("utf-8").splitlines()]
    assert [line["title"] for line in lines if line["kind"] == "memory"] == [TITLE]


def test_a_sigterm_ends_an_export_without_leaving_its_partial_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    scope = SCOPE[1:3]
    turns = [{"speaker": "ann", "text": f"Turn {i} of a long talk about deploys and caches.",
              "time": "2026-03-02T10:00:00Z"} for i in range(3000)]  # fmt: skip
    talk = tmp_path / "talk.jsonl"
    talk.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    done = octobrain("memory", "ingest", str(talk), *scope, env=env)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out" / "backup.jsonl"
    out.parent.mkdir()
    with subprocess.Popen(
        [sys.executable, "-m", "octobrain", "memory", "export", str(out), "--embeddings", *scope],
        stderr=subprocess.PIPE, env=env,
    ) as proc:  # fmt: skip
        assert proc.stderr is not None
        proc.stderr.readline()  # "exporting up to 3,000 memories to …": its partial file is open
        proc.send_signal(signal.SIGSTOP)  # (held there: 0.3 s of export is left to do)
        assert [p.name for p in out.parent.iterdir()] == [f".backup.jsonl.{proc.pid}.partial"]
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        rest = proc.stderr.read()
        assert proc.wait(60) == 128 + signal.SIGTERM
    assert b"Traceback" not in rest, rest
    assert list(out.parent.iterdir()) == []  # no partial file, no half of an export


def test_ingest_reads_standard_input(env: dict[str, str], tmp_path: Path) -> None:
    chat = b'{"speaker": "ann", "text": "The cache key holds the tenant id.", "time": "2026-03-02T10:00:00Z"}\n'  # noqa: E501
    unnamed = octobrain(*SCOPE, "ingest", "-", env=env, stdin=chat)
    assert unnamed.returncode == 2
    assert unnamed.stderr.decode().startswith("error: conversation: is required to ingest")
    named = octobrain(*SCOPE, "ingest", "-", "--conversation", "standup", "--format", "json",
                      env=env, stdin=chat)  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["added"] == 1
    again = octobrain(*SCOPE, "ingest", "-", "--conversation", "standup", "--format", "json",
                      env=env, stdin=chat)  # fmt: skip
    assert json.loads(again.stdout)["skipped_existing"] == 1
    # A Claude Code transcript names its session: no name needed.
    transcript = claude_transcript(tmp_path / "session.jsonl").read_bytes()
    piped = octobrain(*SCOPE, "ingest", "-", "--format", "json", env=env, stdin=transcript)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["added"] == 2
    blank = octobrain(*SCOPE, "ingest", "", env=env)
    assert blank.returncode == 2
    assert blank.stderr.decode().startswith("error: file: must name a conversation file, or -")
