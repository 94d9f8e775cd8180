"""A store gone whole (its disk away, its folder deleted) is refused, not made again empty,
however its path is spelled; a new store opened by two processes at once is no store gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.damage_support import (
    run_cli,
    store_dir,
    three_facts,
)
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line


def test_a_store_gone_whole_is_refused_not_made_again_empty(env: dict[str, str]) -> None:
    # Its disk not mounted, or its directory deleted: nothing in the store is left to say it
    # existed. A fresh empty store was made in its place, answered `total: 0`, and took the
    # next writes (hidden again once the disk is back); `doctor` said ok.
    three_facts(env)
    shutil.rmtree(store_dir(env))
    for args in (("stats",), ("memorize", "-t", "After the loss", "-c", "A new fact here.")):
        done = octobrain(env, *args)
        assert done.returncode == 1 and "total: 0" not in done.stdout, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert "holds no store, yet this machine used one there" in line, line
        assert "mounted" in line and "to start a new store there" in line, line
    assert not (store_dir(env) / "memories.lance").exists(), "an empty store was made in its place"
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "holds no store" in out, out

    # Starting over on purpose: the file the error names is deleted.
    Path(line.rsplit("delete ", 1)[1]).unlink()
    memorize(env, "A new start", "The first fact of a new store.")
    assert "total: 1" in octobrain(env, "stats").stdout


def test_a_new_store_first_opened_by_two_processes_at_once_is_no_store_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Memories and knowledge make their tables each under a lock of their own: the knowledge
    # tables' first open listed the store empty, another process made `memories` (leaving the
    # store's mark) before this one read the mark, and a brand-new store was refused as gone.
    from octobrain.knowledge.store import KnowledgeStore
    from octobrain.store import MemoryStore, seen

    uri, real_gone, other = tmp_path / "db", seen.gone, []

    def meanwhile(at: str) -> str | None:
        if not other:  # (the other process's own first open reads the mark too)
            other.append(MemoryStore(uri, "hash:64", 64))
            other[0].open()
        return real_gone(at)

    monkeypatch.setattr(seen, "gone", meanwhile)
    assert KnowledgeStore(uri, "hash:64", 64).sources.count_rows() == 0
    assert other and other[0].count() == 0
    assert seen.mark_of(str(uri)).exists()


def test_a_store_opens_when_the_marks_of_stores_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The marks (`store.seen`) are best effort, yet a `<data dir>/stores` this user may not
    # look into (made by `sudo octobrain …` with a umask of 077) failed every open of a
    # healthy store: `PermissionError` from asking whether its mark was there.
    from octobrain.store import MemoryStore, seen

    uri = tmp_path / "db"
    MemoryStore(uri, "hash:64", 64).open()
    stores, real_stat = seen.mark_of(str(uri)).parent, Path.stat

    def stat(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.parent == stores:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    assert MemoryStore(uri, "hash:64", 64).count() == 0
    assert MemoryStore(tmp_path / "new", "hash:64", 64).count() == 0


def test_a_store_gone_whole_is_refused_however_its_path_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The mark was keyed by the path as spelled: a store used as <disk>/db and gone whole was
    # made again, empty, when reached through a symlink, with `..`, relative to the working
    # directory or with a trailing slash; and each spelling that opened it left a mark of its own.
    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore, seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    disk = tmp_path / "disk"
    (disk / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(disk)
    others = [tmp_path / "link" / "{}", f"{disk}/sub/../{{}}", "disk/{}", f"{disk}/{{}}/"]
    MemoryStore(disk / "db", "hash:64", 64).open()
    shutil.rmtree(disk / "db")
    for uri in others:
        with pytest.raises(StorageError, match="holds no store, yet this machine used one there"):
            MemoryStore(str(uri).format("db"), "hash:64", 64).count()
        assert not (disk / "db" / "memories.lance").exists(), f"made again empty as {uri}"
    for uri in [disk / "{}", *others]:
        MemoryStore(str(uri).format("kept"), "hash:64", 64).open()
    # A mark a store's place, and one for the spelling through a link (the spellings that
    # resolve by name alone need none: `seen` module doc).
    assert len(list((tmp_path / "data" / seen.FOLDER).glob("*.json"))) == 3


def test_a_bucket_prefix_has_one_mark_however_its_uri_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    seen.note_used("s3://team/octobrain")
    for uri in ("s3://team/octobrain/", "s3://team//octobrain", "s3://team/octobrain//"):
        assert seen.mark_of(uri) == seen.mark_of("s3://team/octobrain"), uri
        assert seen.gone(uri) is not None, uri
    assert seen.gone("s3://team/octobrain2") is None and seen.gone("s3://team") is None


def test_a_store_reached_by_a_spelling_is_marked_by_its_place_and_by_the_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Marks were keyed by the path as spelled (here through a symlink): such a mark still
    # refuses the store gone whole, and the store's next open marks its place too, with the
    # spelling's date; deleting the store's mark on purpose deletes both.
    import hashlib

    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore, seen

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    disk, link = tmp_path / "disk", tmp_path / "link"
    disk.mkdir()
    link.symlink_to(disk)
    MemoryStore(disk / "db", "hash:64", 64).open()
    [mark] = (tmp_path / "data" / seen.FOLDER).glob("*.json")
    mark.unlink()
    digest = hashlib.sha256(str(link / "db").encode()).hexdigest()[:32]
    old = tmp_path / "data" / seen.FOLDER / f"{digest}.json"
    old.write_text(json.dumps({"uri": str(link / "db"), "first_used": 1_600_000_000.0}))

    (disk / "db").rename(disk / "away")  # its disk not mounted
    with pytest.raises(StorageError, match=r"\(since 2020-09-13\)") as refused:
        MemoryStore(link / "db", "hash:64", 64).count()
    assert str(refused.value).endswith(f"delete {old}")
    shutil.rmtree(disk / "db")  # (the lock files the refused open left)
    (disk / "away").rename(disk / "db")  # mounted again

    assert MemoryStore(link / "db", "hash:64", 64).count() == 0
    assert old.exists() and sorted(old.parent.glob("*.json")) == sorted([old, mark])
    assert json.loads(mark.read_text()) == {"uri": str(disk / "db"), "first_used": 1_600_000_000.0}
    seen.forget(str(link / "db"))
    assert list(old.parent.glob("*.json")) == []


def test_a_store_reached_through_a_link_on_its_own_disk_is_refused_while_the_disk_is_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `storage.uri = /mnt/x/current/db`, `current` a link to `releases/7` on that disk: with
    # the disk away the path resolves to nothing like the store's real place, so a mark by
    # the place alone let an empty store be made there.
    from octobrain.errors import StorageError
    from octobrain.store import MemoryStore

    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    disk = tmp_path / "mnt" / "x"
    (disk / "releases" / "7").mkdir(parents=True)
    (disk / "current").symlink_to("releases/7")
    MemoryStore(disk / "current" / "db", "hash:64", 64).open()
    away = tmp_path / "unmounted"
    disk.rename(away)
    disk.mkdir()  # the empty mount point
    with pytest.raises(StorageError, match="holds no store, yet this machine used one"):
        MemoryStore(disk / "current" / "db", "hash:64", 64).count()
    assert not (disk / "current" / "db" / "memories.lance").exists()


def test_a_running_server_whose_data_dir_goes_whole_refuses_it_not_made_again_empty(
    tmp_path: Path,
) -> None:
    # The data dir, the store in it and the marks of stores with it, gone under a running
    # `octobrain mcp` (its disk unmounted, the folder deleted): nothing on disk said a store
    # had been there, so `remember` answered "none are stored … yet", `forget` "no memory …
    # is visible", and `memorize` made a new, empty store there that took the write. The
    # server itself had opened the store: that is enough to know it is gone.
    from mcp import Client
    from mcp.client.stdio import stdio_client

    from tests.server_support import PROJECT_A, call, memory_id, run, stdio_params

    data = tmp_path / "data"
    replies: dict[str, tuple[bool, str]] = {}

    async def session() -> None:
        with (tmp_path / "server.log").open("w") as errlog:
            async with Client(stdio_client(stdio_params(tmp_path), errlog=errlog)) as client:
                fact = {"title": "Deploy order", "content": "Migrate the database before deploy."}
                stored = memory_id((await call(client, "memorize", **fact, scope=PROJECT_A))[1])
                for child in data.iterdir():  # (the mount point stays, empty)
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
                for tool, arguments in (
                    ("remember", {"query": "deploy database"}),
                    ("forget", {"memory_id": stored, "confirm": False}),
                    ("memorize", {"title": "After the loss", "content": "A new fact here."}),
                    ("knowledge", {"command": "search", "query": "deploy"}),
                ):
                    replies[tool] = await call(client, tool, **arguments, scope=PROJECT_A)

    run(session)
    for tool, (error, reply) in replies.items():
        assert error and "holds no store, yet this process" in reply, (tool, reply)
        assert "mounted" in reply and "start octobrain again" in reply, reply
    assert not (data / "db" / "memories.lance").exists(), "an empty store was made in its place"
