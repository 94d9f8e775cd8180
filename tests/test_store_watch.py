"""`StoreWatch`: what a warm process notices of its store's files between two calls, and that
the look stays cheap however many versions a store keeps."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from octobrain.store.watch import StoreWatch
from tests.server_support import hash_pool


def _store(root: Path, versions: int) -> Path:
    table = root / "memories.lance"
    (table / "data").mkdir(parents=True)
    (table / "_versions").mkdir()
    for v in range(1, versions + 1):
        (table / "_versions" / f"{(1 << 64) - 1 - v}.manifest").write_bytes(b"m" * 10)
        (table / "data" / f"{v:08d}.lance").write_bytes(b"d" * 10)
    return table


def test_a_rewrite_anywhere_is_noticed_however_many_files_and_a_commit_is_not(
    tmp_path: Path,
) -> None:
    table = _store(tmp_path, 1000)  # 2,000 files: more than one look's worth
    watch = StoreWatch(tmp_path)
    assert watch.changed() is False  # the first call only looks
    (table / "_versions" / f"{(1 << 64) - 1 - 1001}.manifest").write_bytes(b"m" * 10)
    (table / "data" / "00001001.lance").write_bytes(b"d" * 10)
    assert watch.changed() is False  # an ordinary commit only adds files
    old = table / "data" / "00000007.lance"
    old.write_bytes(b"x" * 11)  # rewritten in place: the folder's own stat does not move
    looks = [watch.changed() for _ in range(2002 // StoreWatch.RESTAT + 1)]
    assert looks.count(True) == 1
    assert watch.changed() is False
    newest = table / "_versions" / f"{(1 << 64) - 1 - 1001}.manifest"
    newest.write_bytes(b"garbage!!!!")
    assert watch.changed() is True  # the newest manifest is looked at on every call
    os.remove(newest)
    assert watch.changed() is True  # the newest gone: a lost commit
    shutil.rmtree(table / "_versions")
    assert watch.changed() is True


def test_a_small_store_has_every_file_looked_at_on_every_call(tmp_path: Path) -> None:
    table = _store(tmp_path, 20)
    watch = StoreWatch(tmp_path)
    watch.changed()
    (table / "data" / "00000013.lance").write_bytes(b"x" * 11)
    assert watch.changed() is True


def test_a_data_file_gone_is_noticed_once_even_when_a_call_settles_first(
    tmp_path: Path,
) -> None:
    # Deleting every data file under a running server went unnoticed: `remember` answered
    # "5 found" from memory while a new process failed on the missing file.
    table = _store(tmp_path, 20)
    watch = StoreWatch(tmp_path)
    watch.changed()
    os.remove(table / "data" / "00000020.lance")
    assert watch.changed() is True  # reopened: a read of that file now fails as it should
    assert watch.changed() is False
    os.remove(table / "data" / "00000002.lance")  # gone during a call, then the call settles
    watch.settle()
    assert watch.changed() is True  # not taken for the call's own (one reopen either way)
    assert watch.changed() is False


def test_a_fifo_among_any_tables_new_files_is_a_change(tmp_path: Path) -> None:
    # Lance opens a table's new files at the next read and waits on a FIFO for a writer: a
    # running server that took one for an ordinary commit hung on its next call for good.
    _store(tmp_path, 3)
    edges = tmp_path / "relationships.lance"
    (edges / "_deletions").mkdir(parents=True)
    (edges / "_indices" / "abc").mkdir(parents=True)
    watch = StoreWatch(tmp_path)
    assert watch.changed() is False
    (edges / "_deletions" / "1-2-3.arrow").write_bytes(b"d")
    (edges / "_indices" / "abc" / "index.idx").write_bytes(b"i")
    assert watch.changed() is False  # regular files: an ordinary commit
    os.mkfifo(edges / "_indices" / "abc" / "page_lookup.lance")
    assert watch.changed() is True
    watch = StoreWatch(tmp_path)
    watch.changed()
    os.mkfifo(edges / "_deletions" / "4-5-6.arrow")
    assert watch.changed() is True


def test_a_knowledge_call_that_makes_its_tables_is_not_taken_for_a_change_underneath(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The first note a server stores makes the knowledge tables; the next call took them for
    # another process's change and reopened the whole store, dropping every scope's Brain.
    pool = hash_pool(tmp_path / "db")
    scope = "github.com/acme/api"
    pool.call(scope, None, lambda brain: brain.memorize("Rate limits", "100 requests a minute."))
    pool.call_knowledge(scope, None, "", lambda k: k.store("runbook", "Restart the worker."))
    with caplog.at_level(logging.INFO, logger="octobrain.server.pool"):
        hits = pool.call(scope, None, lambda brain: brain.remember("rate limits").hits)
    assert [h.memory.title for h in hits][:1] == ["Rate limits"]
    assert "changed underneath" not in caplog.text


def test_the_sessions_of_a_server_share_one_knowledge_mirror_and_see_their_own_notes(
    tmp_path: Path,
) -> None:
    # Each session (and scope) built a mirror of every chunk of its own, 5 s and 10-30 MB a
    # session, kept: a client opening sessions in a loop took a server from 353 MB to 4.3 GB.
    pool = hash_pool(tmp_path / "db")
    api, web = "github.com/acme/api", "github.com/acme/web"
    pool.call_knowledge(api, None, "one", lambda k: k.store("runbook", "Restart the worker."))
    mirrors = {
        id(pool.call_knowledge(scope, None, sid, lambda k: k.index_mirror))
        for scope, sid in [(api, "one"), (api, "two"), (web, "three"), (api, "")]
    }
    assert len(mirrors) == 1

    def found(scope: str, sid: str) -> list[str]:
        result = pool.call_knowledge(
            scope, None, sid, lambda k: k.search("restart the worker", min_relevance=0.0)
        )
        return [hit.uri for hit in result.hits]

    assert found(api, "one") == ["stored://runbook"]
    assert found(api, "two") == [] and found(web, "one") == []  # another session, scope
