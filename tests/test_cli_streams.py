"""The command line as a script drives it: a stdout whose encoding lacks characters, a SIGTERM
in the middle of a long command, and `-` for standard input."""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ingest_support import claude_transcript
from tests.test_cli_exit import env as cli_env  # noqa: F401  (the `env` fixture)

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


# Commands whose stdout is not an answer to parse, or is a format of its own.
NOT_DATA = {
    "memory export": "JSONL, the file `memory import` reads",
    "mcp": "the MCP protocol",
    "hook session-start": "Claude Code's hook protocol",
    "hook pre-compact": "Claude Code's hook protocol",
    "hook session-end": "Claude Code's hook protocol",
    "hook install": "a diff of the settings file, and a question",
}


def test_every_command_that_prints_data_takes_format_json() -> None:
    import click

    from octobrain.cli.main import main

    def commands(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, f"{path} {name}".strip())
            else:
                yield f"{path} {name}".strip(), command

    lacking = [
        name
        for name, command in commands(main, "")
        if name not in NOT_DATA
        and not any(
            p.name == "fmt" and p.type.to_info_dict()["choices"] == ("text", "json")
            for p in command.params
        )
    ]
    assert lacking == []


def test_reports_of_whole_store_and_knowledge_commands_as_json(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `reembed`, `reindex`, `restore`, `knowledge delete`, `delete-source`, `config path` and
    # `config init` printed a sentence only: `--format json` was "no such option", exit 2.
    def answer(*args: str) -> Any:
        done = octobrain(*args, "--format", "json", env=env)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout)

    first = answer(*SCOPE, "memorize", "-t", "Primary database", "-c", "Postgres 16 it is.")
    assert answer("memory", "reembed") == {"reembedded": 1, "model": "hash:64"}
    assert answer("memory", "reindex") == {"dropped": [], "built": []}
    before = answer("memory", "history")[0]["version"]
    answer(*SCOPE, "forget", first["id"], "--yes")
    restored = answer("memory", "restore", str(before), "--yes")
    assert restored["restored"] == before and restored["memories"] == 1
    assert restored["version"] > before
    doc = tmp_path / "deploy.md"
    doc.write_text("# Deploys\n\nA build is promoted from staging to production.\n")
    answer("knowledge", "--scope", "acme/api", "index", str(doc))
    gone = answer("knowledge", "--scope", "acme/api", "delete-source", str(doc))
    assert gone == {"deleted": doc.resolve().as_uri(), "chunks": 1}
    answer("knowledge", "--scope", "acme/api", "store", "plan", "Freeze on Friday.")
    assert answer("knowledge", "--scope", "acme/api", "delete", "plan") == {
        "deleted": "stored://plan"
    }
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    assert answer("config", "path") == {"path": str(config), "exists": False}
    assert answer("config", "init") == {"wrote": str(config)}
    assert answer("config", "path")["exists"] is True


def _answered_at_a_terminal(
    env: dict[str, str], *args: str, typed: bytes = b"y\n"
) -> tuple[int, bytes, bytes]:
    """`octobrain <args>` with a terminal for stdin, on which `typed` is typed; stdout and
    stderr pipes, as in `octobrain … --format json > answer.json`."""
    keyboard, terminal = pty.openpty()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "octobrain", *args],
            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        ) as proc:  # fmt: skip
            os.write(keyboard, typed)
            out, err = proc.communicate(timeout=120)
    finally:
        os.close(keyboard)
        os.close(terminal)
    return proc.returncode, out, err


def test_a_question_asked_at_a_terminal_stays_out_of_the_answer(env: dict[str, str]) -> None:
    # `forget` and `restore` asked on stdout: `Delete them? [y/N]: ` began the JSON a script
    # read (and, redirected to a file, the person never saw the question).
    made = octobrain(*SCOPE, "memorize", "-t", "Primary database", "-c", "Postgres 16 it is.",
                     "--format", "json", env=env)  # fmt: skip
    mid = json.loads(made.stdout)["id"]
    version = json.loads(octobrain("memory", "history", "--format", "json", env=env).stdout)
    code, out, err = _answered_at_a_terminal(env, *SCOPE, "forget", mid, "--format", "json")
    assert (code, json.loads(out)["deleted"]) == (0, 1), err
    # The preview before the question, on stderr too (a person asked with --format json
    # confirmed without seeing what would go).
    assert (
        err
        == f"Will delete 1 memory:\n  {mid}  Primary database: Postgres 16 it is.\n".encode()
        + (b"Delete them? [y/N]: ")
    )
    restore = ("memory", "restore", str(version[0]["version"]), "--format", "json")
    code, out, err = _answered_at_a_terminal(env, *restore)
    assert (code, json.loads(out)["memories"]) == (0, 1), err
    assert err.startswith(b"Restore every scope of ") and err.endswith(b"? [y/N]: ")


def test_hook_install_asks_on_stderr(env: dict[str, str], tmp_path: Path) -> None:
    # `hook install` asked `Write …? [Y/n]: ` on stdout, into a pipe the person reading the
    # diff there never saw it in; `forget` and `restore` ask on stderr.
    settings = tmp_path / "settings.json"
    code, out, err = _answered_at_a_terminal(env, "hook", "install", "--settings", str(settings))
    assert code == 0 and settings.exists(), err
    assert err == f"Write {settings}? [Y/n]: ".encode()
    assert out.startswith(b"--- ") and f"hooks written to {settings}".encode() in out


def test_a_person_declining_at_a_terminal_is_told_nothing_changed(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `forget` and `restore` answered "n" said "Aborted!" and exited 1 (a failure, after the
    # preview was on stdout) where `hook install` said "nothing written" and exited 0.
    made = octobrain(*SCOPE, "memorize", "-t", "Primary database", "-c", "Postgres 16 it is.",
                     "--format", "json", env=env)  # fmt: skip
    mid = json.loads(made.stdout)["id"]
    version = json.loads(octobrain("memory", "history", "--format", "json", env=env).stdout)
    restore = ("memory", "restore", str(version[0]["version"]))
    settings = tmp_path / "settings.json"
    for args, said in [
        ((*SCOPE, "forget", mid), b"Nothing deleted.\n"),
        ((*SCOPE, "forget", mid, "--format", "json"), b'"deleted": 0'),
        (restore, b"Nothing restored.\n"),
        ((*restore, "--format", "json"), b'"restored": null'),
        (("hook", "install", "--settings", str(settings)), b"nothing written\n"),
    ]:
        code, out, err = _answered_at_a_terminal(env, *args, typed=b"n\n")
        assert (code, said in out, b"Aborted" in err) == (0, True, False), (args, out, err)
    assert not settings.exists()
    left = octobrain(*SCOPE, "get", mid, "--format", "json", env=env)
    assert left.returncode == 0 and json.loads(left.stdout)["id"] == mid


def test_every_json_answer_prints_text_as_itself(env: dict[str, str], tmp_path: Path) -> None:
    # `doctor`, `service status`, `memory ingest`, `memory migrate` and the `bench` reports
    # printed JSON of their own (`json.dumps`): a path or name in any language as `\u00e9`
    # escapes, where every other `--format json` answer prints it as written.
    import tempfile

    run_dir = tempfile.mkdtemp(prefix="é")  # (short: a socket path has 107 bytes at most)
    env = {
        **env,
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "données"),
        "XDG_RUNTIME_DIR": run_dir,
    }
    chat = '{"speaker": "anne", "text": "Le cache garde le locataire.", "time": "2026-03-02"}\n'
    ingest = [
        "memory",
        "--scope",
        "github.com/acme/café",
        "ingest",
        "-",
        "--conversation",
        "réunion",
    ]
    migrate = ["memory", "migrate", "--to", str(tmp_path / "copié")]
    try:
        answers = [
            octobrain("doctor", "--format", "json", env=env),
            octobrain("service", "status", "--format", "json", env=env),
            octobrain(*ingest, "--format", "json", env=env, stdin=chat.encode()),
            octobrain(*migrate, "--format", "json", env=env),
        ]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for done in answers:
        assert done.returncode == 0, done.stderr
        assert b"\\u00e9" not in done.stdout and "é".encode() in done.stdout, done.stdout
        assert done.stdout.endswith(b"}\n")
        json.loads(done.stdout)
