"""Progress lines of long commands: never printed before a refusal found at the start, and
never left without a line break before an error found mid-way."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from octobrain.errors import InvalidInput


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
        ("[1]\n", "error: line 1: must be a JSON object"),
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
    from octobrain.cli.common import progress_bar

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
