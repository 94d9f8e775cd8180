"""What the snapshot tests (and the build and catch-up tests) share: a data directory of the test's
own, a Brain that snapshots from one row, memories to fill it with, the ids a query finds and
the snapshot in force."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.snapshot import CURRENT, SnapshotDir

SCOPE = "github.com/acme/api"
TOPICS = ["cache", "queue", "auth", "billing", "search", "deploy", "metrics", "backup"]


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _brain(uri: Path, **search: Any) -> Brain:
    config = Config(search=SearchConfig(**{"snapshot_min_rows": 1, **search}))
    return Brain(SCOPE, config=config, embedder=get_embedder("hash:64"), uri=uri)


def _fill(brain: Brain, n: int = 40, batch: str = "") -> list[str]:
    """`n` memories; a second fill of the same store names its `batch`, so that its memories
    are new ones, not copies of the first fill's (shown once)."""
    from octobrain.models import Memory

    memories = [
        Memory(
            title=f"Note {i} on {TOPICS[i % len(TOPICS)]}{batch}",
            content=f"The {TOPICS[i % len(TOPICS)]} service uses setting zq{i} = {i * 7}.",
            scope=SCOPE,
            tags=[TOPICS[i % len(TOPICS)]],
        )
        for i in range(n)
    ]
    vectors = brain.embedder.embed_documents([m.searchable_text() for m in memories])
    brain.store.add(memories, vectors)
    return [m.id for m in memories]


def _found(brain: Brain, query: str, **kw: Any) -> list[str]:
    hits = brain.remember(query, min_relevance=0.0, record_access=False, **kw).hits
    # As when its process exits: a snapshot due after this query is written in the background.
    brain.retriever.corpus.wait_for_snapshot()
    return [h.memory.id for h in hits]


def _snap_dir(brain: Brain) -> SnapshotDir:
    brain.retriever.corpus.wait_for_snapshot()  # (written after the answer)
    snaps = brain._snapshots()
    assert snaps is not None
    return snaps


def _current(brain: Brain) -> Path:
    snaps = _snap_dir(brain)
    return snaps.path / (snaps.path / CURRENT).read_text(encoding="utf-8")


def _opened_from_snapshot(brain: Brain) -> bool:
    return brain.retriever.corpus.opened_snapshot
