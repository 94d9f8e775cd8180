"""What the `octobrain memory` command tests share: a store of their own, and the command run
through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main


@pytest.fixture
def memory_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A data dir of its own under `tmp_path`, the hash embedder, no config file."""
    values = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    return values


def run(*args: str, input: str | None = None) -> Result:
    """`octobrain memory --scope github.com/acme/api <args>`, in-process."""
    return CliRunner().invoke(
        main, ["memory", "--scope", "github.com/acme/api", *args], input=input
    )


def memorize(title: str, content: str, *extra: str) -> str:
    """The id of a memory stored with `run("memorize", …)`."""
    result = run("memorize", "-t", title, "-c", content, "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["id"])
