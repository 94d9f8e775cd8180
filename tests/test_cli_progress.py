"""Progress lines of long commands: never printed before a refusal found at the start, and
never left without a line break before an error found mid-way."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from octobrain.errors import InvalidInput
from tests.test_cli_exit import env as cli_env  # noqa: F401  (a data dir, commands in-process)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    return tmp_path


def memory(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", *args])


def memorize(title: str, content: str) -> None:
    done = memory("--scope", "github.com/acme/api", "memorize", "-t", title, "-c", content)
    assert done.exit_code == 0, done.output


def test_an_import_refused_at_its_first_line_prints_the_error_alone(env: Path) -> None:
    bad = env / "bad.jsonl"
    for text, line in [
        ('{"kind": "bogus"}\n', "error: line 1.kind: must be header, memory, relationship,"),
        ("not json\n", "error: line 1: "),
        ("[1]\n", "error: line 1: starts a JSON array"),
    ]:
        bad.write_text(text)
        result = memory("import", str(bad))
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(line), result.stderr
        assert len(result.stderr.splitlines()) == 1, result.stderr  # no `checking …` before it


def test_an_import_refused_mid_way_puts_the_error_on_its_own_line(env: Path) -> None:
    memorize("Primary database", "Postgres 16 is the primary database.")
    good = memory("--scope", "github.com/acme/api", "export").stdout
    bad = env / "bad.jsonl"
    *body, end = good.splitlines()
    bad.write_text("\n".join([*body, '{"kind": "bogus"}', end]) + "\n")
    result = memory("import", str(bad))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"checking {bad}",
        f"error: line {len(body) + 1}.kind: must be header, memory, relationship, consolidation "
        "or end",
    ]


def test_migrate_to_a_store_that_is_not_empty_prints_the_error_alone(env: Path) -> None:
    memorize("Primary database", "Postgres 16 is the primary database.")
    target = env / "copy"
    first = memory("migrate", "--to", str(target), "--format", "json")
    assert first.exit_code == 0 and json.loads(first.stdout)["tables"]["memories"] == 1
    assert first.stderr == f"copying to {target}\n"
    again = memory("migrate", "--to", str(target))
    assert again.exit_code == 2
    assert again.stderr.startswith(f"error: to: must be an empty location; {target} already")
    assert len(again.stderr.splitlines()) == 1, again.stderr  # no `copying to …` before it


def test_a_bar_cut_short_on_a_terminal_ends_its_line_before_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from octobrain.cli.progress import progress_bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with pytest.raises(InvalidInput), progress_bar(10, "copying to elsewhere") as progress:
        progress(3)
        raise InvalidInput("to", "must be an empty location")
    assert "copying to elsewhere" in screen.getvalue() and screen.getvalue().endswith("\n")
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    with pytest.raises(InvalidInput), progress_bar(10, "copying to elsewhere"):
        raise InvalidInput("to", "must be an empty location")
    assert quiet.getvalue() == ""  # refused before any work: no bar drawn


# A command run as its own process, its progress on a pseudo-terminal (`pty`): what a person's
# terminal receives, byte for byte.

ESC = b"\x1b"


def _seeded(env: dict[str, str], tmp_path: Path, turns: int) -> dict[str, str]:
    """`env`, its store holding `turns` memories (one conversation, ingested at once)."""
    lines = [json.dumps({"speaker": "ann", "text": f"Turn {i} of a talk about deploys.",
                         "time": "2026-03-02T10:00:00Z"}) for i in range(turns)]  # fmt: skip
    talk = tmp_path / "talk.jsonl"
    talk.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "ingest", str(talk), "--scope", "acme/api"],
        capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return env


@contextmanager
def _on_a_terminal(
    env: dict[str, str], *args: str, columns: int = 80, rows: int = 24
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`octobrain <args>` with its stderr on a terminal `columns` wide and `rows` high, stdout
    a pipe: the process, and the terminal's side to read what it draws."""
    reader, screen = pty.openpty()
    fcntl.ioctl(screen, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "octobrain", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=screen, env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        ) as proc:  # fmt: skip
            os.close(screen)
            yield proc, reader
    finally:
        os.close(reader)


def _read(reader: int, until: bytes | None = None) -> bytes:
    """What the terminal received: all of it (to the writer's end), or up to `until`."""
    got = b""
    while until is None or until not in got:
        ready, _, _ = select.select([reader], [], [], 60)
        assert ready, got
        try:
            chunk = os.read(reader, 65536)
        except OSError:  # (EIO: every writer is gone)
            break
        if not chunk:
            break
        got += chunk
    return got


def _lines_drawn(screen: bytes) -> list[bytes]:
    """Each state of the screen line: what was written between carriage returns."""
    return [part for line in screen.split(b"\r\n") for part in line.split(b"\r") if part]


@pytest.mark.parametrize(
    ("columns", "variables"),
    [(20, {"TERM": "dumb", "NO_COLOR": "1"}), (200, {"COLUMNS": "20"}), (80, {}), (0, {})],
)
def test_a_progress_line_takes_what_the_terminal_takes(
    cli_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    columns: int,
    variables: dict[str, str],
) -> None:
    # Click's bar hid the cursor with an escape sequence (printed as garbage by a TERM=dumb
    # terminal, left hidden by a killed command) and drew `re-embedding with hash:64  [###…]
    # 100%` 77 columns wide whatever the terminal's width: in 20 columns each redraw wrapped
    # onto new lines. A terminal that reports 0 x 0 (some `docker exec -t`) got no line at all:
    # tqdm read its height as -1 and hid the line as one past the screen's last.
    seeded = _seeded(cli_env, tmp_path, 1500)
    # The terminal's own width unless a case sets COLUMNS (pytest-xdist's workers export 80).
    env = {**{k: v for k, v in seeded.items() if k not in ("COLUMNS", "LINES")}, **variables}
    reembed = ("memory", "reembed", "--format", "json")
    with _on_a_terminal(env, *reembed, columns=columns, rows=24 if columns else 0) as (
        proc,
        reader,
    ):
        screen = _read(reader)
        answer = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0
    assert json.loads(answer) == {"reembedded": 1500, "model": "hash:64"}
    assert ESC not in screen, screen
    drawn = _lines_drawn(screen)
    assert len(drawn) > 2 and drawn[-1].endswith(b"100%"), screen
    width = 20 if variables else columns or 80  # (80 where the terminal says 0)
    assert max(len(line) for line in drawn) < width, drawn  # never the last column either
    assert screen.endswith(b"100%\r\n")  # the line ended: what follows starts on its own


def test_a_progress_line_off_a_terminal_is_its_label_once(
    cli_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    env = _seeded(cli_env, tmp_path, 300)
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "memory", "reembed", "--format", "json"],
        capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout)["reembedded"] == 300
    assert done.stderr == b"re-embedding with hash:64\n"


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 1), (signal.SIGTERM, 143)])
def test_a_command_stopped_mid_progress_leaves_the_terminal_as_it_was(
    cli_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    sent: signal.Signals,
    code: int,
) -> None:
    env = _seeded(cli_env, tmp_path, 3000)
    out = tmp_path / "backup.jsonl"
    export = ("memory", "export", str(out), "--embeddings", "--scope", "acme/api")
    with _on_a_terminal(env, *export) as (proc, reader):
        screen = _read(reader, until=b"%\r")  # (a second state drawn: under way)
        proc.send_signal(signal.SIGSTOP)  # held mid-way while the signal is sent
        proc.send_signal(sent)
        proc.send_signal(signal.SIGCONT)
        screen += _read(reader)
        assert proc.wait(60) == code
    assert ESC not in screen, screen  # no cursor hidden, none to show again
    assert b"Traceback" not in screen, screen
    ending = b"\r\nAborted!\r\n" if sent == signal.SIGINT else b"%\r\n"
    assert screen.endswith(ending), screen[-200:]
    assert list(tmp_path.glob("*backup.jsonl*")) == []  # no export, no partial file


def test_an_export_s_progress_names_the_channel_under_way(
    cli_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    # A Slack export's line said `ingesting` from its first channel to its last: a long
    # export moved a channel at a time and never said which.
    from tests.test_ingest_slack_export import _export

    export = _export(tmp_path / "export")
    with _on_a_terminal(cli_env, "memory", "ingest", str(export), "--scope", "acme/api") as (
        proc,
        reader,
    ):
        screen = _read(reader)
        assert proc.wait(60) == 0
    drawn = _lines_drawn(screen)
    assert any(line.startswith(b"ingesting #general (1/2)  [") for line in drawn), drawn
    assert drawn[-1].startswith(b"ingesting #random (2/2)   [") and drawn[-1].endswith(b"100%")
    assert len({line.index(b"[") for line in drawn}) == 1, drawn  # the bar never moved
