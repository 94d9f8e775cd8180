"""`in_thread`: a call's work in a worker thread that stops when the call does.

The SDK cancels a request's handler when its client cancels it (`notifications/cancelled`) or
is gone (a session the resident service hosts ended, an HTTP client away). A handler awaiting
`anyio.to_thread.run_sync` cannot be interrupted: it waits for the thread, and the work ran to
its end for no one (an index of a large file embedded every chunk and committed them, holding
the knowledge lock). `in_thread` hands the work an event set when the handler is cancelled;
work that loops over batches looks at it between batches and stops before writing anything
(`errors.Stopped`). The handler still waits for the thread, so the call's place
among the worker threads is held until the work has stopped. A read that waited for its lock
meanwhile is not run at all (`unless_stopped`); a write runs to its end, nothing half-written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from octobrain.errors import NotStarted

A = TypeVar("A")
T = TypeVar("T")


async def in_thread(work: Callable[[threading.Event], T], limiter: anyio.CapacityLimiter) -> T:
    """`work(stop)` in a worker thread of `limiter`; `stop` is set when this task is
    cancelled, which then waits for the work to end and is cancelled (its answer dropped)."""
    stop = threading.Event()
    done: list[T] = []
    failed: list[Exception] = []
    finished = anyio.Event()

    async def run() -> None:
        try:
            done.append(await anyio.to_thread.run_sync(work, stop, limiter=limiter))
        except Exception as exc:  # the work's own error, raised below as the call's
            failed.append(exc)
        finally:
            finished.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        try:
            await finished.wait()
        except anyio.get_cancelled_exc_class():
            stop.set()  # the thread ends at its next batch; the task group waits for it
            raise
    if failed:
        raise failed[0]
    return done[0]


def unless_stopped(read: Callable[[A], T], stop: threading.Event | None) -> Callable[[A], T]:
    """`read`, not run (`NotStarted`) if `stop` was set by the time it runs: a read called
    under a lock it waited for, whose client cancelled it or went away meanwhile, would have
    run for no one (recording accesses to memories nobody was shown). `stop` None: a call
    that cannot be stopped (run as it is)."""

    def run(argument: A) -> T:
        if stop is not None and stop.is_set():
            raise NotStarted
        return read(argument)

    return run
