"""What the conflict tests (and the race tests built on them) share: the billing timeout stated
with a value, a burst of guesses at it, the `conflicts` edges of a store and what a value
outranked, and unrelated notes to put beside them."""

from __future__ import annotations

from datetime import timedelta

from octobrain.memory.brain import Brain
from octobrain.models import Memory, RelationshipType, Source
from octobrain.times import utcnow
from tests.consolidation_support import add_at, all_edges

FILLER = [
    ("Billing retries", "The billing service retries a failed charge three times, an hour apart."),
    ("Search timeout", "Search queries give up after 2 seconds and return partial results."),
    ("Checkout errors", "Checkout shows a generic error page when the billing service is down."),
    ("Database", "Postgres 16 is the primary database; Redis only caches sessions."),
    ("Frontend stack", "The web client is written in TypeScript with React and Vite."),
    ("Deploys", "Deploys run through the blue green pipeline with a smoke test first."),
]


def timeout(value: int) -> str:
    return f"The billing service request timeout is {value} seconds."


def conflict_edges(brain: Brain) -> set[tuple[str, str]]:
    return {
        (e.source_id, e.target_id)
        for e in all_edges(brain).values()
        if e.relationship_type is RelationshipType.CONFLICTS
    }


def burst(brain: Brain, size: int) -> tuple[Memory, list[Memory]]:
    """A user's value, weeks old, and `size` agent guesses at it since, one an hour, newest
    first: each guess a conflict the user's value prevails in, once a pass checks the guess."""
    now = utcnow()
    told = add_at(
        brain, "Timeout", timeout(30), now - timedelta(days=30), source=Source.USER_CONFIRMED
    )
    guesses = [
        add_at(brain, "Timeout", timeout(100 + i), now - timedelta(hours=i)) for i in range(size)
    ]
    return told, guesses


def outranked(brain: Brain, told: Memory) -> set[str]:
    return {loser for winner, loser in conflict_edges(brain) if winner == told.id}
