"""The resident service's place: the lock file it holds and the socket file it listens on,
taken as it starts (`Place.take`), given back as it stops (`Place.release`), and whether it
still has them as they were when it took them (`Place.lost`).

Both can be taken from under a running service: its runtime directory removed and made again
(`rm -rf`, logind at logout, a harness's temporary `XDG_RUNTIME_DIR`), or its socket file
removed or replaced. A service that kept listening then was reached by no client, and the next
command started a second one in the new files (the lock it holds is on a file gone): two for
one data directory, the first for its whole idle time (200+ MB for ten minutes). With the
socket file alone gone, it kept the lock: no service started, every command ran in-process.
A service that finds it lost its place steps aside (`Service.serve`), as one told to stop."""

from __future__ import annotations

import contextlib
import os
import socket
import time

from octobrain.cli.service_client import took_lock
from octobrain.cli.service_settings import Settings

LOOK_SECONDS = 1.0  # between two looks (two `stat`s, a few µs), on the accept loop's idle ticks


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


class Place:
    """The lock file and the socket file of a service, from when it took them to when it gives
    them back."""

    def __init__(self, settings: Settings, lock_fd: int, listener: socket.socket) -> None:
        self.listener = listener
        self._lock = lock_fd
        self._files = (
            ("socket", settings.socket_path, _identity(os.stat(settings.socket_path))),
            ("lock", settings.lock_path, _identity(os.fstat(lock_fd))),
        )
        self._next = time.monotonic() + LOOK_SECONDS
        self._released = False

    @classmethod
    def take(cls, settings: Settings, *, succeed: bool = False) -> Place | None:
        """This data dir's lock, with the pid written in it, and a socket listening at its
        path (None: another service holds the lock, or is starting, and answers). One started
        to `succeed` a service stepping aside waits for it (`service_client.took_lock`)."""
        lock = os.open(settings.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        if not took_lock(settings, lock, succeed=succeed):
            os.close(lock)  # (one taken for a successor a `service stop` came for)
            return None
        with contextlib.suppress(OSError):  # who holds it, for `service status|stop` to name
            os.ftruncate(lock, 0)
            os.pwrite(lock, str(os.getpid()).encode(), 0)
        path = settings.socket_path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead service's stale socket, or a stray listener (we hold the lock)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        listener.listen(64)
        return cls(settings, lock, listener)

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

    def release(self) -> None:
        """Remove the socket file, if it is still this service's, and let go of the lock: a new
        service may start. Only the first call does anything."""
        if self._released:
            return
        self._released = True
        _what, path, own = self._files[0]
        with contextlib.suppress(OSError):
            if _identity(os.stat(path)) == own:
                os.unlink(path)
        os.close(self._lock)
