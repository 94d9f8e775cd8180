"""A long-lived process whose mirror a current snapshot opened (an in-process `octobrain mcp`
server, opened by its warm-up) answers its next reads from it without opening LanceDB while
the store's files say nothing was committed since, and still sees every commit made since."""

from __future__ import annotations

from pathlib import Path

from octobrain.memory.brain import Brain
from tests.test_snapshot_served import _brain, _store_with_snapshot
from tests.test_snapshot_served import data_dir as data_dir  # (autouse: the data dir)


def _top(brain: Brain, query: str) -> str:
    return brain.remember(query, min_relevance=0.0, record_access=False).hits[0].memory.id


def test_a_long_lived_process_reads_again_without_lancedb_until_the_store_changes(
    tmp_path: Path,
) -> None:
    # Before: its second read probed the store's versions through LanceDB, importing it (half
    # of an in-process MCP server's first `remember`, the first read after its warm-up).
    ids = _store_with_snapshot(tmp_path / "db")
    server = _brain(tmp_path / "db")
    assert _top(server, "setting zq4") == ids[4]  # (the warm-up's read)
    assert _top(server, "setting zq7") == ids[7]
    assert _top(server, "setting zq9") == ids[9]
    assert server.retriever.corpus.opened_snapshot
    assert not server.store.connected
    # A commit by another process is seen at the next read, as before (through LanceDB).
    added, _ = _brain(tmp_path / "db").memorize("Fresh note", "The cache uses setting zqnew.")
    assert _top(server, "setting zqnew") == added.id
    assert server.store.connected


def test_an_access_another_process_kept_meanwhile_shows_in_the_next_read(tmp_path: Path) -> None:
    ids = _store_with_snapshot(tmp_path / "db")
    server = _brain(tmp_path / "db")
    assert _top(server, "setting zq3") == ids[3]
    other = _brain(tmp_path / "db")
    assert [h.memory.id for h in other.remember("setting zq3", limit=1).hits] == [ids[3]]
    other._access_queue().flush(keep=True)  # (a process of its own, as it exits)
    assert _top(server, "setting zq3") == ids[3]
    corpus = server.retriever.corpus
    assert corpus.memory(corpus.pos_of.get(ids[3], -1)).access_count == 1
    assert _top(server, "setting zq3") == ids[3]  # (applied once, however often read)
    assert corpus.memory(corpus.pos_of.get(ids[3], -1)).access_count == 1
    assert not server.store.connected
