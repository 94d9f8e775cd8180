"""octobrain as a library, as README's "From Python" shows it: a Brain in forked children and
in test suites that make many. Real LanceDB in temp dirs, the hash embedder."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octobrain import Brain, Config, StorageError, get_embedder
from octobrain.store import MemoryStore

SCOPE = "github.com/acme/api"
MakeBrain = Callable[..., Brain]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(**kwargs: Any) -> Brain:
        kwargs = {"config": Config(), "embedder": get_embedder("hash:64"), **kwargs}
        return Brain(SCOPE, uri=tmp_path / "db", **kwargs)

    return make


def _memory(brain: Brain, i: int) -> str:
    return brain.memorize(f"note number {i}", f"the content of note number {i}")[0].id


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
