"""Access counts of what recall returns, committed off the recall path and at exit, and several
writing processes that lose and duplicate nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import ACCESS_WINDOW, Brain
from octobrain.times import utcnow
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared


def test_access_counts_only_returned_results_and_persist(make_brain: MakeBrain) -> None:
    brain = make_brain()
    hit, _ = brain.memorize(*TOKEN_BUCKET)
    miss, _ = brain.memorize(*POSTGRES)
    brain.remember("token bucket", limit=1)
    brain.remember("token bucket", limit=1)  # within the window: still one access
    brain.recent()
    brain.stats()
    # remember only queues the bump; a background commit counts it within about a second.
    deadline = time.monotonic() + 30
    while make_brain().get(hit.id).access_count == 0:
        assert time.monotonic() < deadline, "the queued access was never committed"
        time.sleep(0.1)
    brain.remember("token bucket", limit=1)  # the mirror heard of the commit: not due again
    brain.flush()
    fresh = make_brain()
    assert fresh.get(hit.id).access_count == 1
    assert fresh.get(miss.id).access_count == 0
    assert brain.retriever.corpus.due_for_access([hit.id], utcnow(), ACCESS_WINDOW) == []


def test_access_is_counted_when_a_cli_remember_returns(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    env.pop("OCTOBRAIN_CONFIG_PATH", None)

    def cli(*args: str) -> str:
        argv = [sys.executable, "-m", "octobrain", "memory", "--scope", "github.com/acme/x"]
        done = subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    mid = json.loads(cli("memorize", "-t", "Backups", "-c", TOKEN_BUCKET[1], "--format", "json"))
    cli("remember", "token bucket")
    assert json.loads(cli("get", mid["id"], "--format", "json"))["access_count"] == 1


def test_the_exit_flush_waits_for_a_commit_the_background_thread_is_making(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process's exit flush found nothing queued while the background thread was committing
    # the bumps it had taken, and returned: the process then ended (`exit_now`) with that
    # commit half made, and the accesses were never counted.

    from octobrain.memory.access import AccessQueue
    from octobrain.store import MemoryStore

    brain = make_brain()
    hit, _ = brain.memorize(*TOKEN_BUCKET)
    committing, release = threading.Event(), threading.Event()
    real = MemoryStore.record_access

    def slow(self: MemoryStore, *args: Any, **kwargs: Any) -> int:
        committing.set()
        assert release.wait(30)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MemoryStore, "record_access", slow)
    queue = AccessQueue(brain.store, ACCESS_WINDOW)
    queue.add([hit.id], utcnow())
    assert committing.wait(30)  # the background thread took the bump and is committing it
    flushed = threading.Thread(target=queue.flush)
    flushed.start()
    flushed.join(0.5)
    assert flushed.is_alive()  # the exit flush waits for it
    release.set()
    flushed.join(30)
    assert make_brain().get(hit.id).access_count == 1


WRITER = textwrap.dedent(
    """
    import sys
    from octobrain.memory.brain import Brain
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder

    uri, worker = sys.argv[1], sys.argv[2]
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    for i in range(200):
        title, content = f"worker {worker} note {i}", f"content from worker {worker}, item {i}"
        mem, _ = brain.memorize(title, content)
        print(mem.id, flush=True)  # acknowledged: memorize returned
    seen = brain.remember(f"worker {worker} note 7", min_relevance=0.0, limit=50)
    print("SEEN", len(seen.hits), flush=True)
    """
)


def test_three_processes_lose_nothing_and_duplicate_nothing(tmp_path: Path) -> None:
    uri = tmp_path / "db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(uri), str(w)], stdout=subprocess.PIPE, text=True
        )
        for w in range(3)
    ]
    acknowledged = []
    for proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0
        lines = out.split("\n")
        acknowledged += [line for line in lines if line and not line.startswith("SEEN")]
    brain = Brain("github.com/acme/api", config=Config(), embedder=get_embedder("hash:64"), uri=uri)
    rows = [r["id"] for r in brain.store.scan("true", columns=["id"])]
    assert len(acknowledged) == 600
    assert sorted(rows) == sorted(acknowledged) and len(set(rows)) == 600
    # Every process sees the others' writes: a fresh search covers all 600.
    assert brain.stats()["total"] == 600
    hits = brain.remember(
        ["worker 0 note 5", "worker 1 note 5", "worker 2 note 5"], min_relevance=0.0, limit=50
    )
    assert {h.memory.title.split()[1] for h in hits.hits} == {"0", "1", "2"}


def test_a_second_writer_is_seen_between_own_accesses(make_brain: MakeBrain) -> None:
    reader, writer = make_brain(), make_brain()  # two handles on one store, as two processes
    first, _ = reader.memorize(*TOKEN_BUCKET)
    assert [h.memory.id for h in reader.remember("token bucket").hits] == [first.id]
    later, _ = writer.memorize(*POSTGRES)
    reader.remember("token bucket")  # its own access commit must not hide the writer's commit
    assert [h.memory.id for h in reader.remember("postgres database").hits] == [later.id]
    writer.forget([first.id], confirm=True)
    assert reader.remember("token bucket").hits == []
