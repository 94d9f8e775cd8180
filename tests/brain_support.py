"""What the memory engine's tests share: a Brain on real LanceDB in a temp dir with the hash
embedder, and two memories to store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain

MakeBrain = Callable[..., Brain]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(
        scope: str = "github.com/acme/api", model: str = "hash:64", session_id: str = ""
    ) -> Brain:
        return Brain(
            scope,
            config=Config(),
            embedder=get_embedder(model),
            uri=tmp_path / "db",
            session_id=session_id,
        )

    return make


TOKEN_BUCKET = (
    "Rate limiting decision",
    "API rate limiting uses a token bucket per key: 100 requests per minute, burst 20.",
)
POSTGRES = ("Primary database", "Postgres 16 is the primary database; Redis only caches sessions.")
