"""A resident service killed by a fatal signal (SIGBUS: a snapshot file it had mapped cut in
place while it read it; a crash in native code) leaves what it was doing in its log."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from octobrain.cli.service_client import ask
from tests.service_support import current_settings, exited, start_service, wait_for
from tests.service_support import env as env  # (the `env` fixture)


def test_a_service_killed_by_sigbus_logs_every_threads_stack(env: dict[str, str]) -> None:
    # Before: the service died and its log said nothing; the next command ran in-process.
    start_service(env)
    pid = int(ask(current_settings(), "status")["pid"])  # type: ignore[index]
    os.kill(pid, signal.SIGBUS)  # (what a read of a page past a cut file's end raises)
    assert wait_for(lambda: exited(pid), 30)
    logged = Path(current_settings().log_path).read_text(encoding="utf-8", errors="replace")
    assert "Fatal Python error: Bus error" in logged, logged
    # (the main thread's stack, as far as the service's loop; the whole log shown if not:
    # once in a CI run it lacked this, as if the main thread had left the loop)
    assert "run_service" in logged, logged
