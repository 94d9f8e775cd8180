"""Handing freed memory back to the system."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["collect_later", "on_trim", "resident_bytes", "trim_heap"]

_malloc_trim: Any = None
_collect_due = False
_holders: list[Callable[[], None]] = []  # what else keeps freed memory (`on_trim`)


def on_trim(give_back: Callable[[], None]) -> None:
    """Have every `trim_heap` call `give_back` first: a part of the process that keeps memory
    it no longer needs in an allocator of its own (the bundled model's arena)."""
    _holders.append(give_back)


def collect_later() -> None:
    """Have the next `trim_heap` run a full garbage collection first: what a mirror dropped
    may sit in reference cycles, and a full collection in a warm service takes ~100 ms, which
    the command that dropped it should not wait for (the service trims after its answer)."""
    global _collect_due
    _collect_due = True


def trim_heap() -> None:
    """Hand the heap's free pages back to the system (Arrow's pool, then glibc's `malloc_trim`).
    A mirror built from the store or a sleep pass frees hundreds of MB that the allocators would
    otherwise keep for the rest of the process's life (or hand out again only for the sizes
    they were)."""
    global _malloc_trim, _collect_due
    if _collect_due:
        _collect_due = False
        gc.collect()
    for give_back in _holders:
        give_back()
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to hand back this way
            _malloc_trim = False
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:  # Arrow's own allocator keeps freed blocks too
        arrow.default_memory_pool().release_unused()
    if _malloc_trim:
        _malloc_trim(0)


def resident_bytes() -> int | None:
    """This process's resident set now (None where `/proc` does not tell)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
