"""octobrain as a library, as README's "From Python" shows it: the exported names typed and
documented, wrong arguments refused by name, and a Brain in threads, event loops, forked
children and test suites that make many. Real LanceDB in temp dirs, the hash embedder."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import pydoc
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import octobrain
from octobrain import Brain, Config, InvalidInput, StorageError, get_embedder
from octobrain.store import MemoryStore

SCOPE = "github.com/acme/api"
MakeBrain = Callable[..., Brain]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(**kwargs: Any) -> Brain:
        kwargs = {"config": Config(), "embedder": get_embedder("hash:64"), **kwargs}
        return Brain(SCOPE, uri=tmp_path / "db", **kwargs)

    return make


def test_every_exported_name_is_documented_and_brain_says_what_it_takes() -> None:
    for name in octobrain.__all__:
        if name != "__version__":
            assert (getattr(octobrain, name).__doc__ or "").strip(), name
    shown = pydoc.render_doc(octobrain, renderer=pydoc.plaintext)
    for name in ("class Brain(", "class Knowledge(", "derive_scope(", "get_embedder("):
        assert name in shown, name
    brain_doc = pydoc.render_doc(Brain, renderer=pydoc.plaintext)
    for argument in ("scope", "config", "embedder", "uri", "workdir", "session_id"):
        assert f"`{argument}`" in brain_doc, argument


def test_a_client_program_type_checks_strictly(tmp_path: Path) -> None:
    """py.typed holds: a program using the README's calls passes `mypy --strict`."""
    client = tmp_path / "client.py"
    client.write_text(
        textwrap.dedent(
            """
            import octobrain
            from octobrain import (
                Brain,
                Forgotten,
                InvalidInput,
                Knowledge,
                Memory,
                NotFound,
                Recall,
                SearchResult,
                Stored,
                derive_scope,
            )

            def version() -> str:
                return octobrain.__version__

            def titles(brain: Brain, query: str) -> list[str]:
                recall: Recall = brain.remember(query, limit=3)
                return [hit.memory.title for hit in recall.hits]

            def store(brain: Brain) -> Memory:
                memory, links = brain.memorize("Rate limits", "A token bucket per key.")
                return memory

            # What the methods return and raise, by their exported names (they lived at
            # private paths only: `octobrain.memory.copies.Stored`, …).
            def kept(brain: Brain) -> Stored:
                return brain.memorize("Rate limits", "A token bucket per key.")

            def gone(brain: Brain, ids: list[str]) -> int:
                try:
                    done: Forgotten = brain.forget(ids, confirm=True)
                except NotFound:
                    return 0
                return done.deleted

            def found(knowledge: Knowledge) -> SearchResult:
                return knowledge.search("rollback")

            try:
                titles(Brain(derive_scope()), "how do we throttle clients")
            except InvalidInput as exc:
                print(exc.field, exc.rule)
            """
        )
    )
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary"]
    out = subprocess.run(
        [*mypy, "--cache-dir", str(tmp_path / "cache"), str(client)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_readme_example_runs_as_written(tmp_path: Path) -> None:
    """README's "From Python" block, on the bundled model, in a project of its own."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### From Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {k: v for k, v in os.environ.items() if k != "OCTOBRAIN_EMBEDDING_MODEL"}
    env |= {"OCTOBRAIN_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    relevance, title = out.stdout.strip().split(" ", 1)
    assert title == "Rate limits" and 0 < float(relevance) <= 1


def _memory(brain: Brain, i: int) -> str:
    return brain.memorize(f"note number {i}", f"the content of note number {i}")[0].id


# Each call is refused by name; before, each raised a TypeError or AttributeError from deep
# inside (or, for the flags, did what a truthy string says: `global_="no"` wrote globally).
WRONG: dict[str, tuple[str, Callable[[Any, str], object]]] = {
    "remember(None)": ("query", lambda b, m: b.remember(None)),
    "count_access(1)": ("ids", lambda b, m: b.count_access(1, datetime.now(UTC))),
    "count_access(naive)": ("now", lambda b, m: b.count_access([m], datetime(2026, 1, 1))),
    "flush(keep)": ("keep", lambda b, m: b.flush(keep="x")),
    "remember(1)": ("query", lambda b, m: b.remember(1)),
    "memory_types=1": ("memory_types", lambda b, m: b.remember("qq", memory_types=1)),
    "record_access": ("record_access", lambda b, m: b.remember("qq", record_access="no")),
    "include_archived": (
        "include_archived",
        lambda b, m: b.remember("qq", include_archived="no"),
    ),
    "global_": ("global_", lambda b, m: b.memorize("a title", "some content", global_="no")),
    "add_tags=1": ("add_tags", lambda b, m: b.update(m, add_tags=1)),
    "remove_tags=[[]]": ("remove_tags[0]", lambda b, m: b.update(m, remove_tags=[["x"]])),
    "add_files=None": ("add_files", lambda b, m: b.update(m, add_files=None)),
    "remove_files=1": ("remove_files", lambda b, m: b.update(m, remove_files=1)),
    "forget(one id)": ("memory_ids", lambda b, m: b.forget(m, confirm=True)),
    "forget(None)": ("memory_ids", lambda b, m: b.forget(None, confirm=True)),
    "forget_preview(1)": ("query", lambda b, m: b.forget_preview(1)),
    "dry_run": ("dry_run", lambda b, m: b.sleep_consolidate(dry_run="no")),
    "config": ("config", lambda b, m: octobrain.Brain(SCOPE, config="x")),
    "embedder": ("embedder", lambda b, m: Brain(SCOPE, embedder="hash:64")),
    "uri": ("uri", lambda b, m: Brain(SCOPE, embedder=b.embedder, uri=1)),
    # (storage.uri's rule: a file:// store put its write lock and records under ./file:/…)
    "uri=file://": ("uri", lambda b, m: Brain(SCOPE, embedder=b.embedder, uri=f"file://{b.uri}")),
    "knowledge uri=file://": (
        "uri",
        lambda b, m: octobrain.Knowledge(SCOPE, embedder=b.embedder, uri=f"file://{b.uri}"),
    ),
    "session_id": ("session_id", lambda b, m: Brain(SCOPE, session_id=1)),
    "workdir": ("workdir", lambda b, m: Brain(SCOPE, workdir=1)),
    "knowledge config": ("config", lambda b, m: octobrain.Knowledge(SCOPE, config={})),
    "knowledge cwd": ("cwd", lambda b, m: octobrain.Knowledge(SCOPE, embedder=b.embedder, cwd=1)),
    "derive_scope(1)": ("directory", lambda b, m: octobrain.derive_scope(1)),
    "load_config(1)": ("path", lambda b, m: octobrain.load_config(1)),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrong_argument_is_refused_by_its_name(make_brain: MakeBrain, case: str) -> None:
    field, call = WRONG[case]
    brain = make_brain()
    memory_id = _memory(brain, 0)
    before = brain.stats()["total"]
    with pytest.raises(InvalidInput) as refused:
        call(brain, memory_id)
    assert refused.value.field == field, refused.value
    assert brain.stats()["total"] == before  # (nothing written, nothing forgotten)


def test_two_brains_on_one_store_in_one_process_see_each_others_writes(
    make_brain: MakeBrain,
) -> None:
    first, second = make_brain(), make_brain()
    first.memorize("Rate limiting decision", "A token bucket per API key, 100 a minute.")
    second.memorize("Primary database", "Postgres 16 is the primary database.")
    assert first.remember("primary database postgres").hits[0].memory.title == "Primary database"
    assert second.remember("token bucket rate").hits[0].memory.title == "Rate limiting decision"


def test_one_brain_shared_by_threads_keeps_every_acknowledged_write(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    doomed = [_memory(brain, i) for i in range(8)]

    def work(i: int) -> str:
        written = _memory(brain, 100 + i)
        brain.remember(f"note number {i}")
        if i < len(doomed):
            brain.forget([doomed[i]], confirm=True)
        if i % 3 == 0:
            brain.update(written, add_tags=[f"t{i}"])
        return written

    with ThreadPoolExecutor(8) as pool:
        acknowledged = set(pool.map(work, range(24)))
    held = {m.id for m in make_brain().recent(1000)}  # (read through a Brain of its own)
    assert held == acknowledged


def test_a_brain_answers_inside_a_running_event_loop(make_brain: MakeBrain) -> None:
    async def main() -> list[str]:
        brain = make_brain()
        brain.memorize("Rate limiting decision", "A token bucket per API key, 100 a minute.")
        return [h.memory.title for h in brain.remember("token bucket").hits]

    assert asyncio.run(main()) == ["Rate limiting decision"]


def _in_forked_child(brain: Brain, fresh: bool, answer: Any) -> None:
    use = (
        Brain(SCOPE, config=brain.config, embedder=brain.embedder, uri=brain.uri)
        if fresh
        else brain
    )
    outcome = []
    for call in (lambda: use.remember("token bucket"), lambda: _memory(use, 1)):
        try:
            call()
            outcome.append("answered")
        except StorageError as exc:
            outcome.append(str(exc))
    answer.put(outcome)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # LanceDB's own warning at fork
@pytest.mark.parametrize("fresh", [False, True], ids=["its-parents-brain", "a-new-brain"])
def test_a_forked_child_of_a_process_that_opened_a_store_is_told_to_spawn(
    make_brain: MakeBrain, fresh: bool
) -> None:
    """LanceDB crashes or hangs in a forked child about half the time; octobrain refuses
    instead (before: its parent's Brain failed every write with "inherited across fork …
    check free space and permissions", and a new one crashed the child)."""
    brain = make_brain()
    brain.memorize("Rate limiting decision", "A token bucket per API key, 100 a minute.")
    brain.remember("token bucket")
    brain.flush()
    fork = multiprocessing.get_context("fork")
    answer = fork.SimpleQueue()
    child = fork.Process(target=_in_forked_child, args=(brain, fresh, answer))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    outcome = answer.get()
    assert len(outcome) == 2
    for line in outcome:
        assert "was forked from" in line and "'spawn'" in line, line
    assert [h.memory.title for h in brain.remember("token bucket").hits]  # the parent goes on


def test_many_brains_made_and_dropped_leave_no_store_open(tmp_path: Path) -> None:
    """A suite making a Brain a test: each one's store and connections go with it (before,
    each store's access queue was held by an `atexit` entry until the process ended)."""

    def use_one(i: int) -> None:
        brain = Brain(
            SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / f"db{i}"
        )
        _memory(brain, i)
        brain.remember("note number")
        brain.flush()

    def stores() -> int:
        gc.collect()
        return sum(isinstance(o, MemoryStore) for o in gc.get_objects())

    use_one(0)
    for thread in threading.enumerate():  # (a queue's thread holds it while it counts)
        if thread.name == "octobrain-access":
            thread.join()
    held = stores()
    descriptors = len(os.listdir("/proc/self/fd"))
    for i in range(1, 11):
        use_one(i)
    for thread in threading.enumerate():
        if thread.name == "octobrain-access":
            thread.join()
    assert stores() <= held
    assert len(os.listdir("/proc/self/fd")) <= descriptors


def test_a_store_deleted_under_a_brain_is_a_storage_error_on_every_call(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    """Before, a read raised LanceDB's RuntimeError ("lance error: Not found: …/_versions,
    /root/.cargo/registry/src/…/commit.rs:653:26"), which `except OctobrainError` missed."""
    brain = make_brain()
    memory_id = _memory(brain, 0)
    brain.remember("note number")
    brain.flush()
    shutil.rmtree(tmp_path / "db")
    calls: list[Callable[[], object]] = [
        lambda: brain.remember("note number"),
        lambda: brain.recent(),
        lambda: brain.get(memory_id),
        lambda: brain.stats(),
        lambda: brain.history(),
        lambda: brain.forget([memory_id], confirm=True),
        lambda: _memory(brain, 1),
    ]
    for call in calls:
        with pytest.raises(StorageError, match=r"^store: "):
            call()


def test_a_config_or_embedder_setting_made_in_python_is_checked_as_a_file_is(
    tmp_path: Path,
) -> None:
    # A `Config` made in Python was never checked (only one read from the file or the
    # environment was): `default_limit=0` or a limit over `max_results` went on to fail deep
    # inside, or to be used; `get_embedder(batch_size=0)` or `"32"` failed at the first text.
    from octobrain import ConfigError, Knowledge, get_embedder
    from octobrain.config import Config, SearchConfig

    hashed = get_embedder("hash:64")
    for search, said in [
        (SearchConfig(default_limit=0), "search.default_limit: must be between 1 and 1000"),
        (SearchConfig(default_limit=80), "search.default_limit: must be <= search.max_results"),
    ]:
        for make in (Brain, Knowledge):
            with pytest.raises(ConfigError, match=f"^{re.escape(said)}$"):
                make("acme/api", config=Config(search=search), embedder=hashed, uri=tmp_path)
    for setting, said in [
        ({"batch_size": 0}, "embedding.batch_size: must be between 1 and 2048"),
        ({"batch_size": "32"}, "embedding.batch_size: must be an integer"),
        ({"allow_download": "no"}, "embedding.allow_download: must be true or false"),
    ]:
        with pytest.raises(ConfigError, match=f"^{re.escape(said)}$"):
            get_embedder("hash:64", **setting)
    assert Brain("acme/api", config=Config(), embedder=hashed, uri=tmp_path).scope == "acme/api"
