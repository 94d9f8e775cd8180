"""What a mirror drops is freed after the service's answer, not while a command waits."""

from __future__ import annotations

import gc
import weakref

from octobrain.heap import collect_later, trim_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only a garbage collection frees it


def test_a_requested_collection_runs_at_the_next_trim_and_only_then() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        node = _Node()
        gone = weakref.ref(node)
        del node
        trim_heap()  # nothing asked for: no collection
        assert gone() is not None
        collect_later()
        assert gone() is not None  # asking does not collect
        trim_heap()
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()
