"""The locks of a store on a local disk: a lock file beside the tables (`filelock`) that
says who holds it (`LockFile`), as an object store's lease names its holder (`store.lease`).

A writer that finds the lock held says so on stderr after `SAY_AFTER_S`, naming the holder and
how long it waits; when the wait runs out, the error names the holder too. (A paused `memory
import`, Ctrl-Z, kept every other write waiting two minutes without a word, then blamed free
space and permissions.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from octobrain.files import read_regular, replace_whole
from octobrain.store.lease import StoreBusy

log = logging.getLogger(__name__)

SAY_AFTER_S = 1.5  # a wait this long is said on stderr (a commit takes milliseconds)
_HOLDER_BYTES = 64 << 10
_COMMAND_CHARS = 200
# Threads of this process waiting past `SAY_AFTER_S`, by lock file (a store's handles each
# have their own `LockFile`: the background sleep pass has its own).
_WAITING: dict[str, int] = {}
_WAITING_GUARD = threading.Lock()


class LockFile:
    """The lock `.<name>.lock` of the store at `root`, re-entrant within a process (its threads
    queue, as `filelock`'s do). While held, `.<name>.holder.json` beside it names this process
    (pid and command line). Use as a context manager; `timeout` < 0 waits for good, 0 fails at
    once (`StoreBusy`) when it is held."""

    def __init__(self, root: Path, name: str, timeout: float) -> None:
        from filelock import FileLock

        self._root, self._name, self._timeout = root, name, timeout
        self._lock = FileLock(str(root / f".{name}.lock"), timeout=timeout)
        self._holder = root / f".{name}.holder.json"

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Hold the lock (once more, if this thread holds it); `StoreBusy` naming its holder
        when the wait runs out."""
        from filelock import Timeout

        timeout = self._timeout
        first = SAY_AFTER_S if timeout < 0 else min(SAY_AFTER_S, timeout)
        try:
            self._lock.acquire(timeout=first)
        except Timeout:
            if 0 <= timeout <= first:
                raise StoreBusy(self._busy(self.holder(), timeout)) from None
            path = self._lock.lock_file
            with _WAITING_GUARD:  # said once for this process's threads waiting together
                _WAITING[path] = _WAITING.get(path, 0) + 1
                say = _WAITING[path] == 1
            try:
                if say:
                    log.warning(
                        "store %s: %s holds its %s lock; waiting %s for it to let go",
                        self._root,
                        self.holder(),
                        self._name,
                        "until it does" if timeout < 0 else f"up to {timeout:.0f} s",
                    )
                self._lock.acquire(timeout=-1 if timeout < 0 else timeout - first)
            except Timeout:
                raise StoreBusy(self._busy(self.holder(), timeout)) from None
            finally:
                with _WAITING_GUARD:
                    _WAITING[path] -= 1
        if self._lock.lock_counter == 1:
            self._say_held()

    def release(self) -> None:
        """Leave one level; the outermost takes this process's name away and lets go."""
        if self._lock.lock_counter == 1:
            with contextlib.suppress(OSError):
                self._holder.unlink()
        self._lock.release()

    def _say_held(self) -> None:
        """Name this process beside the lock (best effort: a store on a read-only disk, or a
        record that cannot be written, only leaves a waiter without a name)."""
        record = {"pid": os.getpid(), "command": _command(sys.argv)}
        try:
            replace_whole(self._holder, json.dumps(record).encode())
        except OSError as exc:
            log.debug("could not name the holder of %s: %s", self._holder, exc)

    def holder(self) -> str:
        """Who holds the lock, in words: its pid and command where known."""
        pid = _flock_holder(self._root / f".{self._name}.lock")
        command = None
        try:
            record = json.loads(read_regular(self._holder, _HOLDER_BYTES)[0])
            named = record.get("pid") if isinstance(record, dict) else None
            if isinstance(named, int) and not isinstance(named, bool) and named > 0:
                if pid is None and _alive(named):
                    pid = named
                if named == pid and isinstance(record.get("command"), str):
                    command = record["command"][:_COMMAND_CHARS]
        except (OSError, ValueError, RecursionError):
            pass  # none written (another program holds it), or half-written: said without it
        if pid is None:
            return "another process"
        if pid == os.getpid():
            return f"another thread of this process (pid {pid})"
        if command is None:
            command = _command_of(pid)
        return f"another process (pid {pid}{f': {command}' if command else ''})"

    def _busy(self, holder: str, timeout: float) -> str:
        waited = "" if timeout <= 0 else f" for {timeout:.0f} s"
        return (
            f"store: cannot write to {self._root}: {holder} held its {self._name} lock "
            f"({self._lock.lock_file}){waited}; nothing was changed. Try again once that "
            "process has finished (a process stopped with Ctrl-Z holds it until resumed: `fg`)"
        )


@contextlib.contextmanager
def held_shared(root: Path, name: str, timeout: float) -> Iterator[bool]:
    """The lock `.<name>.lock` of the store at `root` held shared (`flock`, the file opened
    read only: nothing is written) by a reader, such as `doctor`, of what a writer commits in
    two steps under that lock: a writer holding it is waited for, up to `timeout` seconds,
    and none takes it meanwhile. Yields whether it is held (not when there is no lock file,
    which no writer then holds, or it is something else, or the wait ran out)."""
    import fcntl

    try:
        fd = os.open(root / f".{name}.lock", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        yield False
        return
    try:
        held = stat.S_ISREG(os.fstat(fd).st_mode)
        deadline = time.monotonic() + timeout
        while held:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                held = time.monotonic() < deadline
                time.sleep(0.02)
            except OSError:  # (a file system without locks)
                held = False
        yield held
    finally:
        os.close(fd)  # (lets go of the lock)


def _command(argv: list[str]) -> str:
    """A command line, shortened: the program by its name, not its path, and without the
    interpreter that runs it (`python …/bin/octobrain memory import` is `octobrain memory
    import`)."""
    words = list(argv)
    interpreter = len(words) > 1 and os.path.basename(words[0]).startswith("python")
    if interpreter and not words[1].startswith("-"):
        words = words[1:]
    if not words:
        return ""
    line = " ".join([os.path.basename(words[0]), *words[1:]])
    return line if len(line) <= _COMMAND_CHARS else line[: _COMMAND_CHARS - 1] + "…"


def _flock_holder(path: Path) -> int | None:
    """The pid Linux's /proc/locks gives for the flock on `path` (whoever took it: another
    release, `flock(1)`), or None where it does not say."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiter's line has "->")
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
            pid = int(fields[4]) if fields[4].isdigit() else 0
            return pid if pid > 0 else None
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's
    return True


def _command_of(pid: int) -> str | None:
    """The command line of process `pid`, from /proc where there is one."""
    try:
        raw = read_regular(f"/proc/{pid}/cmdline", _HOLDER_BYTES)[0]
    except OSError:
        return None
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return _command(argv) or None
