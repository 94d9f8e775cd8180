"""octobrain as a library, past one call: the collections a caller has at hand (a set of
tags, a tuple of ids, a generator) taken as the lists they stand for, and a Brain or Knowledge
closed (`with Brain(...) as brain:`) letting go of what it holds and refusing later calls."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from octobrain import Brain, Config, InvalidInput, Knowledge, get_embedder

SCOPE = "github.com/acme/api"


def _brain(tmp_path: Path, **kwargs: Any) -> Brain:
    kwargs = {"config": Config(), "embedder": get_embedder("hash:64"), **kwargs}
    return Brain(SCOPE, uri=tmp_path / "db", **kwargs)


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
        ({"db": 1}, "must be a list of strings, got object"),
        (1, "must be a list of strings, got integer"),
        ({"db", "a\nb"}, "must be one line"),
    ],
)
def test_a_string_bytes_or_mapping_is_still_refused_by_name(
    tmp_path: Path, value: object, rule: str
) -> None:
    with pytest.raises(InvalidInput, match=rule) as refused:
        _brain(tmp_path).memorize("Primary database", "Postgres 16 is primary.", tags=value)  # type: ignore[arg-type]
    assert refused.value.field.startswith("tags")


def _held_under(folder: Path) -> list[str]:
    """The files under `folder` this process holds open or has mapped into memory."""
    held = [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()]
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            held.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sorted({path for path in held if path.startswith(str(folder))})


def test_a_brain_closed_commits_its_counts_lets_go_and_refuses_later_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: no close() and no `with` (AttributeError: __enter__); what a Brain held (its
    # mirror's snapshot mapped into memory, its access thread) went only when the garbage
    # collector or the process's exit took it.
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))  # (the snapshots' home)
    config = Config()
    config = replace(config, search=replace(config.search, snapshot_min_rows=1))
    with _brain(tmp_path, config=config) as brain:  # (leaves a snapshot of the mirror)
        memory, _ = brain.memorize("Primary database", "Postgres 16 is the primary database.")
    running = set(threading.enumerate())  # (an earlier test's access thread may be ending)
    with _brain(tmp_path, config=config) as brain:
        assert brain.remember("postgres database").hits  # (its access queued, not committed)
        assert _held_under(tmp_path / "data")  # (the snapshot serves it)
    assert brain.closed
    # Its access committed, no thread of its left running, no file of its held or mapped.
    assert not [
        t.name for t in set(threading.enumerate()) - running if t.name == "octobrain-access"
    ]
    assert _held_under(tmp_path) == []
    with _brain(tmp_path) as other:
        assert other.get(memory.id).access_count == 1
    calls: list[Callable[[], object]] = [
        lambda: brain.remember("postgres database"),
        lambda: brain.memorize("Another note", "Redis caches the sessions."),
        lambda: brain.get(memory.id),
        lambda: brain.stats(),
        lambda: brain.flush(),
        lambda: brain.for_scope(""),
    ]
    for call in calls:
        with pytest.raises(InvalidInput, match=r"^Brain: this Brain is closed"):
            call()
    brain.close()  # (again: nothing to do)


def test_knowledge_closes_as_a_brain_does(tmp_path: Path) -> None:
    doc = tmp_path / "deploy.md"
    doc.write_text("# Deploys\n\nA build is promoted from staging to production.\n")
    with Knowledge(
        SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db"
    ) as knowledge:
        knowledge.index(str(doc))
        assert knowledge.search("promoted to production").hits
    assert _held_under(tmp_path) == []
    for call in (lambda: knowledge.read(str(doc)), lambda: knowledge.stats()):
        with pytest.raises(InvalidInput, match=r"^Knowledge: this Knowledge is closed"):
            call()
    knowledge.close()
