"""octobrain as a library, past one call: the collections a caller has at hand (a set of
tags, a tuple of ids, a generator) taken as the lists they stand for, and a Brain or Knowledge
closed (`with Brain(...) as brain:`) letting go of what it holds and refusing later calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octobrain import Brain, Config, InvalidInput, get_embedder

SCOPE = "github.com/acme/api"


def _brain(tmp_path: Path, **kwargs: Any) -> Brain:
    return Brain(
        SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db", **kwargs
    )


def test_a_set_or_generator_of_strings_is_taken_as_a_list(tmp_path: Path) -> None:
    # Before: `tags={"db", "ops"}` was "tags: must be a list of strings, got set".
    brain = _brain(tmp_path)
    memory, _ = brain.memorize(
        "Primary database",
        "Postgres 16 is the primary database.",
        tags={"ops", "db", "postgres"},
        related_files=(f for f in ["db/schema.sql"]),
    )
    assert memory.tags == ["db", "ops", "postgres"]  # a set's order: sorted, every run
    assert memory.related_files == ["db/schema.sql"]
    found = brain.remember("postgres database", tags={"db"}, memory_types=frozenset({"code"}))
    assert [h.memory.id for h in found.hits] == [memory.id]
    assert brain.remember({"postgres database", "primary"}).hits
    updated = brain.update(memory.id, add_tags={"infra"}, remove_tags={"ops"})
    assert updated.tags == ["db", "postgres", "infra"]
    brain.count_access({memory.id}, memory.created_at)
    assert brain.forget({memory.id}, confirm=True)
    assert brain.stats()["total"] == 0


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("db", "must be a list of strings, not one string"),
        (b"db", "must be a list of strings, got bytes"),
        ({"db": 1}, "must be a list of strings, got dict"),
        (1, "must be a list of strings, got int"),
        ({"db", "a\nb"}, "must be one line"),
    ],
)
def test_a_string_bytes_or_mapping_is_still_refused_by_name(
    tmp_path: Path, value: object, rule: str
) -> None:
    with pytest.raises(InvalidInput, match=rule) as refused:
        _brain(tmp_path).memorize("Primary database", "Postgres 16 is primary.", tags=value)  # type: ignore[arg-type]
    assert refused.value.field.startswith("tags")
