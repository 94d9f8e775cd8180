"""Fixtures the reliability tests share."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.server_support import server_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A CLI subprocess's environment: its own data dir, the fast hash embedder."""
    return server_env(tmp_path / "data")


@pytest.fixture
def frozen(env: dict[str, str]) -> Iterator[Callable[[], None]]:
    """Make the data dir immutable (chattr +i binds root too); always thaw it afterwards."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    root = env["OCTOBRAIN_DATA_DIR"]

    def freeze() -> None:
        done = subprocess.run(["chattr", "-R", "+i", root], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"this filesystem cannot make files immutable: {done.stderr!r}")

    yield freeze
    subprocess.run(["chattr", "-R", "-i", root], capture_output=True, check=False)
