"""What the damaged-store tests share: a store's folder, a few memories written (related, or
indexed), `octobrain <args>` run as a user runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from octobrain.config import Config, EmbeddingConfig
from octobrain.memory.brain import Brain
from tests.reliability.test_storage_faults import EXE, memorize, octobrain


def store_dir(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]) / "db"


def three_facts(env: dict[str, str]) -> set[str]:
    return {memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.") for i in range(3)}


def related_pair(env: dict[str, str]) -> tuple[list[str], Path]:
    """Three memories (their ids, sorted), the first two related, and the one data file of
    `relationships` that link wrote."""
    ids = sorted(three_facts(env))
    assert octobrain(env, "relate", ids[0], ids[1]).returncode == 0
    [data] = (store_dir(env) / "relationships.lance" / "data").glob("*.lance")
    return ids, data


def run_cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """`octobrain <args>` (no `--scope`): return code, stdout, stderr."""
    done = subprocess.run(
        [EXE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def indexed_store(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """12 memories with their three scalar indexes built; their ids."""
    from octobrain.models import Memory
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "SCALAR_INDEX_MIN_ROWS", 10)  # indexes from 10 rows here
    config = Config(embedding=EmbeddingConfig(model="hash:64"))
    brain = Brain("github.com/acme/api", config=config, uri=store_dir(env))
    facts = [
        Memory(
            title=f"Fact {i}", content=f"Durable fact {i} on port {8000 + i}.", scope=brain.scope
        )
        for i in range(12)
    ]
    brain.store.add(facts, brain.embedder.embed_documents([m.searchable_text() for m in facts]))
    brain.store.compact()
    indexed = {ix.columns[0] for ix in brain.store.memories.list_indices()}
    assert indexed == {"id", "title", "scope", "state"}
    return [m.id for m in facts]
