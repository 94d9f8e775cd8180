"""`doctor` run while another process writes (the resident service indexing a document, an
agent memorizing): a commit landing between its reads of one table is no damage. Each table is
read at the version it opened at, so its row count and the rows read agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.knowledge.store import table_schemas
from octobrain.memory.brain import Brain
from octobrain.store import doctor_tables
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.schema import CHUNKS, MEMORIES, SOURCES
from tests.reliability.kills import SCOPE, guide, knowledge_at


@pytest.mark.parametrize("table", [MEMORIES, CHUNKS, SOURCES])
@pytest.mark.parametrize("hook", ["lost_version", "history_gap"])  # (before and after the count)
def test_a_commit_between_doctors_reads_of_a_table_is_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, hook: str
) -> None:
    store = tmp_path / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)
    brain.memorize("Lease", "The write lease is renewed every 20 seconds.")
    knowledge = knowledge_at(store)
    knowledge.index(str(guide(tmp_path / "old.md", "bluegreen", 3)))
    writes = {
        MEMORIES: lambda: brain.memorize("Canary", "Releases go out behind a canary first."),
        CHUNKS: lambda: knowledge.index(str(guide(tmp_path / "new.md", "rainbow", 3))),
    }
    writes[SOURCES] = writes[CHUNKS]
    real, pending = getattr(doctor_tables, hook), [table]

    def meanwhile(*args: Any) -> Any:
        """Another process commits to `table` after doctor opened it."""
        opened = args[-1] if hook == "lost_version" else args[0]
        if opened.name in pending:
            pending.remove(opened.name)
            writes[opened.name]()
        return real(*args)

    monkeypatch.setattr(doctor_tables, hook, meanwhile)
    report = diagnose(StoreLocation(store), table_schemas())
    assert not pending
    assert report.ok, [p.line() for p in report.problems]
    assert diagnose(StoreLocation(store), table_schemas()).ok  # (and the write is whole)
