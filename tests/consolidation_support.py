"""What the consolidation tests (and the reliability tests built on them) share: a Brain on real
LanceDB in a temp dir, memories added at a given time, the raw rows and edges of its store,
and near-duplicate notes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import Memory, Source
from octobrain.store.schema import row_to_relationship
from octobrain.times import utcnow

SCOPE = "github.com/acme/api"
MakeBrain = Callable[..., Brain]
# Near-identical for the hash embedder too (pairwise cosine well above 0.85).
TWINS = [
    "Deploys run through the blue green pipeline with a smoke test before the switch.",
    "Deploys run through the blue green pipeline, with a smoke test before the switch.",
    "Deploys run through the blue green pipeline with one smoke test before the switch.",
    "All deploys run through the blue green pipeline with a smoke test before the switch.",
]
OTHER = [
    ("Primary database", "Postgres 16 is the primary database; Redis only caches sessions."),
    ("Frontend stack", "The web client is written in TypeScript with React and Vite."),
]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(scope: str = SCOPE, model: str = "hash:64") -> Brain:
        return Brain(scope, config=Config(), embedder=get_embedder(model), uri=tmp_path)

    return make


def add_at(brain: Brain, title: str, content: str, when: datetime, **fields: Any) -> Memory:
    """Store a memory as if written at `when` (memorize always stamps now)."""
    fields.setdefault("scope", brain.scope)
    memory = Memory(
        title=title, content=content, created_at=when, updated_at=when, last_accessed=when, **fields
    )
    brain.store.add([memory], brain.embedder.embed_documents([memory.searchable_text()]))
    return memory


def raw_rows(brain: Brain) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in brain.store.scan("true")}


def all_edges(brain: Brain) -> dict[str, Any]:
    rows = brain.store.relationships.search().where("true").limit(None).to_list()
    return {r["id"]: row_to_relationship(r) for r in rows}


def twins(
    brain: Brain,
    source: Source = Source.AGENT_INFERRED,
    count: int = 4,
    title: str = "Deploy pipeline",
) -> list[str]:
    now = utcnow()
    return [
        add_at(brain, title, text, now - timedelta(hours=6 * i), source=source).id
        for i, text in enumerate(TWINS[:count])
    ]


def merged(brain: Brain, texts: Sequence[str]) -> tuple[Memory, list[Memory]]:
    """Store `texts` and merge them in one sleep pass: (the parent, the members)."""
    now = utcnow()
    notes = [add_at(brain, "Deploy day", text, now) for text in texts]
    (done,) = brain.sleep_consolidate(threshold=0.3, min_size=2).consolidations
    assert {m.id for m in done.members} == {n.id for n in notes}
    return done.parent, notes
