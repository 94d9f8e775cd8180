"""A store used in a process forked from one that had opened a store: refused in one line.

LanceDB (0.40) resets its runtime in a child made by `fork`, but a child that then reads or
writes crashes (SIGSEGV) or hangs in about half of runs, with the parent's table handles or
new ones alike. A Brain a parent used and a forked child (multiprocessing's default start on
Linux before Python 3.14) used again failed every write with filelock's "inherited across
fork; construct a new instance … (check free space and permissions)" and read at that risk.
So every use of a store in such a child is `StorageError` saying what to do instead.
"""

from __future__ import annotations

import os

from octobrain.errors import StorageError

_OPENER: int | None = None  # the process that first connected to LanceDB
_FORKED_FROM: int | None = None  # in a child forked after that: the process that connected


def _after_fork_in_child() -> None:
    global _FORKED_FROM
    if _OPENER is not None and _FORKED_FROM is None:
        _FORKED_FROM = _OPENER


os.register_at_fork(after_in_child=_after_fork_in_child)  # (not a `getpid` at every check)


def connecting(where: object) -> None:
    """Call before connecting to the store `where`: refuses in a forked child (`check`)."""
    global _OPENER
    check(where)
    _OPENER = os.getpid()


def check(where: object) -> None:
    """`StorageError` when this process was forked from one that had opened a store."""
    if _FORKED_FROM is not None:
        raise StorageError(
            f"store: {where}: this process (pid {os.getpid()}) was forked from pid "
            f"{_FORKED_FROM} after it had opened a store, and LanceDB does not run reliably in a "
            "forked child (it crashes or hangs); start child processes with the 'spawn' or "
            "'forkserver' method (multiprocessing.get_context('spawn')), or fork before opening "
            "a store"
        )
