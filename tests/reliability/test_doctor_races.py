"""`doctor` run while another process writes (the resident service indexing a document, an
agent memorizing) or cleans up (its maintenance pass compacting a table and removing old
versions): a commit landing between its reads of one table is no damage. Each table is read at
the version it opened at, so its row count and the rows read agree; a read failing because
that version was cleaned up meanwhile is done again at the newest version."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import pytest
from lancedb.index import BTree
from lancedb.table import LanceTable

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.knowledge.store import KnowledgeStore, table_schemas
from octobrain.memory.brain import Brain
from octobrain.store import doctor, doctor_tables
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.schema import CHUNKS, MEMORIES, RELATIONSHIPS, SOURCES
from tests.reliability.kills import SCOPE, guide, knowledge_at


def _writes(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    """A store at `tmp_path / "db"` holding a memory and a document, and a write to each of
    its tables that another process might commit."""
    store = tmp_path / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)
    brain.memorize("Lease", "The write lease is renewed every 20 seconds.")
    knowledge = knowledge_at(store)
    knowledge.index(str(guide(tmp_path / "old.md", "bluegreen", 3)))
    index = lambda: knowledge.index(str(guide(tmp_path / "new.md", "rainbow", 3)))  # noqa: E731
    return {
        MEMORIES: lambda: brain.memorize("Canary", "Releases go out behind a canary first."),
        CHUNKS: index,
        SOURCES: index,
    }


def _doctor_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: str, table: str, meanwhile: Any
) -> None:
    """Run `doctor` with `meanwhile()` done when it reaches `hook` for `table`; it says ok."""
    real, pending = getattr(doctor_tables, hook), [table]

    def hooked(*args: Any) -> Any:
        opened = args[-1] if hook == "lost_version" else args[0]
        if opened.name in pending:
            pending.remove(opened.name)
            meanwhile()
        return real(*args)

    monkeypatch.setattr(doctor_tables, hook, hooked)
    report = diagnose(StoreLocation(tmp_path / "db"), table_schemas())
    assert not pending
    assert report.ok, [p.line() for p in report.problems]
    assert diagnose(StoreLocation(tmp_path / "db"), table_schemas()).ok  # (and the write is whole)


@pytest.mark.parametrize("table", [MEMORIES, CHUNKS, SOURCES])
@pytest.mark.parametrize("hook", ["lost_version", "history_gap"])  # (before and after the count)
def test_a_commit_between_doctors_reads_of_a_table_is_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, hook: str
) -> None:
    writes = _writes(tmp_path)
    _doctor_with(tmp_path, monkeypatch, hook, table, writes[table])


@pytest.mark.parametrize(  # (before and after the rows are read)
    ("hook", "table"),
    [
        ("history_gap", MEMORIES),
        ("history_gap", CHUNKS),
        ("history_gap", SOURCES),
        ("_check_indexes", MEMORIES),
        ("_check_indexes", CHUNKS),
    ],
)
def test_the_version_doctor_reads_cleaned_up_meanwhile_is_no_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, hook: str
) -> None:
    """Before: `memories: cannot be read (… Not found: …/data/<file>.lance)` (or `index id_idx
    on id cannot be read`), exit 1, with a restore as the repair, when the service compacted
    the table and cleaned up the version doctor had pinned (a week old: past
    `KEEP_VERSIONS_FOR`, here made so by cleaning up everything older than now)."""
    writes = _writes(tmp_path)
    if hook == "_check_indexes":
        writes[table]()  # (a table of one fragment and an index is not compacted)
        lancedb.connect(tmp_path / "db").open_table(table).create_index("id", config=BTree())

    def compacted() -> None:
        writes[table]()
        with warnings.catch_warnings():  # (LanceDB warns of what this test is about)
            warnings.simplefilter("ignore", UserWarning)
            other = lancedb.connect(tmp_path / "db").open_table(table)
            other.optimize(cleanup_older_than=timedelta(0))

    _doctor_with(tmp_path, monkeypatch, hook, table, compacted)


@pytest.mark.parametrize("writer", ["forget", "index"])
def test_a_writer_between_its_two_commits_is_waited_for_not_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """Before: `relationships: 1 edge(s) point at a memory that no longer exists (a forget
    killed between its two commits)` (an index: `knowledge_chunks: 3 chunk(s) … that no source
    row names`), exit 1, of a `forget` (an index) still running, paused between its commits
    for as long as doctor's two reads took. Now doctor reads again holding the writer's lock
    shared, which it takes once that writer is done."""
    store = tmp_path / "db"
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)
    hub, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    link = [{"target_id": hub.id, "relationship_type": "related_to"}]
    brain.memorize("Refresh rotation", "Refresh tokens rotate on use.", related_to=link)
    knowledge = knowledge_at(store)
    knowledge.index(str(guide(tmp_path / "old.md", "bluegreen", 3)))
    between, asked = threading.Event(), threading.Event()

    def paused(second: Callable[..., Any]) -> Callable[..., Any]:
        def commit(table: Any, *args: Any) -> Any:
            if writer == "index" or table.name == RELATIONSHIPS:
                between.set()
                asked.wait(60)  # (until doctor asks for the lock; a bound if it never does)
            return second(table, *args)

        return commit

    if writer == "forget":
        monkeypatch.setattr(LanceTable, "delete", paused(LanceTable.delete))
        run: Callable[[], Any] = lambda: brain.forget([hub.id], confirm=True)  # noqa: E731
    else:
        monkeypatch.setattr(KnowledgeStore, "_flip", paused(KnowledgeStore._flip))
        run = lambda: knowledge.index(str(guide(tmp_path / "new.md", "rainbow", 3)))  # noqa: E731
    real = getattr(doctor, "held_shared", None)

    @contextlib.contextmanager
    def asking(*args: Any) -> Iterator[bool]:
        asked.set()
        assert real is not None
        with real(*args) as held:
            yield held

    monkeypatch.setattr(doctor, "held_shared", asking, raising=False)
    thread = threading.Thread(target=run)
    thread.start()
    try:
        between.wait(60)
        report = diagnose(StoreLocation(store), table_schemas())
    finally:
        asked.set()
        thread.join()
    assert report.ok, [p.line() for p in report.problems]
    assert (report.dangling_edges, report.orphan_chunks) == (0, 0)
