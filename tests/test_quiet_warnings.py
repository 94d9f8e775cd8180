"""Repeated warnings quieted (`server.quiet.QuietWarning`): the MCP server runs its tools and
HTTP requests in threads, so one warning is counted from many threads at once."""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from octobrain.server import quiet
from octobrain.server.quiet import QuietWarning


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Threads switch every microsecond, so a count taken apart by a switch shows."""
    was = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(was)


def test_a_warning_from_many_threads_is_logged_or_counted_every_time(
    monkeypatch: pytest.MonkeyPatch, switch_often: None
) -> None:
    # Each call moves the clock on 10 ms: a window of 1 s ends every 100 calls, while other
    # threads still count into it. Every warning is either logged or counted in a later line.
    ticks = itertools.count()
    later = [0.0]
    clock = SimpleNamespace(monotonic=lambda: later[0] + next(ticks) * 0.01)
    monkeypatch.setattr(quiet, "time", clock)
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            time.sleep(0)  # lets other threads run, as writing to a file or a pipe does
            said.append(record.getMessage())

    log = logging.getLogger("octobrain.test.quiet")
    log.propagate = False
    monkeypatch.setattr(log, "handlers", [Keep()])
    warning = QuietWarning(log, 5, 1.0, "", "%d more were not logged")
    threads, each = 16, 2000
    start = threading.Barrier(threads)

    def flood() -> None:
        start.wait()
        for _ in range(each):
            warning.warn("refused")

    workers = [threading.Thread(target=flood) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    later[0] = 3600.0  # a window later, the next line says what the last one counted
    warning.warn("refused")
    counted = [int(line.split()[0]) for line in said if line.endswith("were not logged")]
    assert said.count("refused") + sum(counted) == threads * each + 1
