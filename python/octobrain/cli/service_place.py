"""Whether the resident service still has its place: the socket file it listens on and the
lock file it holds, as they were when it took them (`service_daemon.run_service`).

Both can be taken from under a running service: its runtime directory removed and made again
(`rm -rf`, logind at logout, a harness's temporary `XDG_RUNTIME_DIR`), or its socket file
removed or replaced. A service that kept listening then was reached by no client, and the next
command started a second one in the new files (the lock it holds is on a file gone): two for
one data directory, the first for its whole idle time (200+ MB for ten minutes). With the
socket file alone gone, it kept the lock: no service started, every command ran in-process.
A service that finds it lost its place steps aside (`Service.serve`), as one told to stop."""

from __future__ import annotations

import os
import time

from octobrain.cli.service_settings import Settings

LOOK_SECONDS = 1.0  # between two looks (two `stat`s, a few µs), on the accept loop's idle ticks


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


class Place:
    """The socket file and the lock file of a service that has just taken them."""

    def __init__(self, settings: Settings, lock_fd: int) -> None:
        self._files = (
            ("socket", settings.socket_path, _identity(os.stat(settings.socket_path))),
            ("lock", settings.lock_path, _identity(os.fstat(lock_fd))),
        )
        self._next = time.monotonic() + LOOK_SECONDS

    def lost(self) -> str | None:
        """Why this service is no longer where its clients look for it (None: it is, or this
        is not the time to look again)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + LOOK_SECONDS
        for what, path, own in self._files:
            try:
                info = os.stat(path)
            except FileNotFoundError:
                return f"its {what} file {path} was removed"
            except OSError:  # (cannot tell: stays)
                continue
            if _identity(info) != own:
                return f"its {what} file {path} was replaced"
        return None
