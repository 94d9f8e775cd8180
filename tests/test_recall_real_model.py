"""Recall with the real bundled model (offline): the answers a user relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain

MEMORIES = [
    (
        "Rate limiting decision",
        "We throttle API clients with a token bucket per key: 100 requests per minute, burst 20.",
    ),
    (
        "Primary database",
        "Postgres 16 is the system of record; Redis holds only caches and job queues.",
    ),
    (
        "Deployment pipeline",
        "Releases ship from GitHub Actions to Kubernetes with a blue/green switch.",
    ),
    (
        "Auth token expiry bug",
        "Clients saw ERR_TOKEN_EXPIRED after 55 minutes: clock skew was not allowed for.",
    ),
    ("Frontend stack", "The web app is React 18 with TypeScript and Vite; styling uses Tailwind."),
    (
        "User prefers concise answers",
        "The user wants short answers without long preambles or summaries.",
    ),
    (
        "Logging convention",
        "Services log JSON lines to stdout; never log request bodies or secrets.",
    ),
    (
        "Test policy",
        "Every bug fix needs a regression test that fails before the fix and passes after.",
    ),
]


@pytest.fixture(scope="module")
def brain(tmp_path_factory: pytest.TempPathFactory) -> Brain:
    uri: Path = tmp_path_factory.mktemp("real") / "db"
    b = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("minilm"), uri=uri)
    for title, content in MEMORIES:
        b.memorize(title, content)
    return b


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("rate limiting", "Rate limiting decision"),
        ("how do we throttle abusive clients", "Rate limiting decision"),
        ("which database do we use", "Primary database"),
        ("how are releases deployed", "Deployment pipeline"),
        ("ERR_TOKEN_EXPIRED", "Auth token expiry bug"),
        ("what does the user like in responses", "User prefers concise answers"),
    ],
)
def test_finds_the_right_memory(brain: Brain, query: str, title: str) -> None:
    hits = brain.remember(query, record_access=False).hits
    assert hits, f"nothing found for {query!r}"
    assert hits[0].memory.title == title


@pytest.mark.slow
@pytest.mark.parametrize(
    "query", ["chocolate cake recipe", "who won the football world cup", "migratory birds of Peru"]
)
def test_unrelated_queries_find_nothing_relevant(brain: Brain, query: str) -> None:
    assert brain.remember(query, record_access=False).hits == []
