"""A resident service killed by a fatal signal (SIGBUS: a snapshot file it had mapped cut in
place while it read it; a crash in native code) leaves what it was doing in its log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.test_resident_service import _exited, _settings, _start, _wait, ask
from tests.test_resident_service import env as env  # (the `env` fixture)


def test_a_service_killed_by_sigbus_logs_every_threads_stack(env: dict[str, str]) -> None:
    # Before: the service died and its log said nothing; the next command ran in-process.
    _start(env)
    pid = int(ask(_settings(), "status")["pid"])  # type: ignore[index]
    os.kill(pid, signal.SIGBUS)  # (what a read of a page past a cut file's end raises)
    assert _wait(lambda: _exited(pid), 30)
    logged = Path(_settings().log_path).read_text(encoding="utf-8", errors="replace")
    assert "Fatal Python error: Bus error" in logged, logged
    assert "run_service" in logged  # (the main thread's stack, as far as the service's loop)
