"""The client side of the resident service (`octobrain.cli.service_daemon`): whether it is
this build, reaching it, asking it, and starting it (where it lives: `service_settings`).
Standard library only, so a warm call costs little more than starting the interpreter.

The exchange, one JSON object per line over a Unix socket:
client `request` → service `hello` (protocol, build, accepted) → service `ready` (it holds the
execution lock) → client `go` → service `running` → service `result` (stdout, stderr, exit).
The client falls back in-process only before the service says `running`, so a command is never
run twice; a connection lost after `running` is reported as a failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from octobrain.cli.service_settings import Settings, data_dir

if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 2  # 2: a running command's service sends `alive` every `ALIVE_EVERY_SECONDS`
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # octobrain/
CONNECT_SECONDS = 1.0
# A hook's JSON on stdin names its transcript by path; anything much larger is not a hook's
# input (`/dev/zero` piped in took 6 GB in 10 s). Read one past it, so the hook sees the cut.
HOOK_INPUT_BYTES = 1 << 20
# `service status` / `stop` are asked for by a person: a service busy on a loaded machine
# must still read as running, not as absent after a second.
ASK_SECONDS = 5.0
RESULT_SECONDS = 600.0
# While a command runs the service says it is alive this often; a client that hears nothing for
# `ALIVE_SECONDS` takes the service for stopped or stuck (SIGSTOP, a deadlock) and says so,
# instead of waiting out `RESULT_SECONDS`.
ALIVE_EVERY_SECONDS = 1.0
ALIVE_SECONDS = 10.0


_build: str | None = None


def build_id() -> str:
    """A fingerprint of the installed package files and of the packages installed beside them:
    a service of another install, of an edited source tree, or from before a dependency was
    upgraded (`pip install -U lancedb`: it still ran the old one) never answers for this one."""
    global _build
    if _build is not None:
        return _build
    h = hashlib.sha256(str(PROTOCOL).encode())
    for root, dirs, files in os.walk(_PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".so", ".pyd")):
                st = os.stat(os.path.join(root, name))
                h.update(f"{root}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    for packages in _installed():
        h.update(f"{packages};".encode())
    _build = h.hexdigest()[:24]
    return _build


def _installed() -> list[str]:
    """The installed distributions' metadata directories (`lancedb-0.22.0.dist-info`) in each
    package directory on the path: their names carry the versions, and an install, upgrade
    or removal changes them (one directory listing each, about 0.2 ms)."""
    names = []
    for entry in sys.path:
        if os.path.basename(entry) not in ("site-packages", "dist-packages"):
            continue
        try:
            listed = os.listdir(entry)
        except OSError:
            continue
        names += sorted(n for n in listed if n.endswith((".dist-info", ".egg-info")))
    return names


class Channel:
    """One JSON object per line over a connected Unix socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def pending(self) -> bytes:
        """What was received beyond the last message."""
        return bytes(self._buf)

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def recv(self, timeout: float, limit: int | None = None) -> dict[str, Any] | None:
        """The next message; None at end of stream. Raises TimeoutError, and ValueError for a
        message longer than `limit` bytes (the service's bound on what a client sends)."""
        deadline = time.monotonic() + timeout
        too_long = ValueError(f"a message over {limit} bytes")
        end = self._buf.find(b"\n")
        while end < 0:
            if limit is not None and len(self._buf) > limit:
                raise too_long
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            at = chunk.find(b"\n")  # only the new bytes are searched: linear in the message
            end = len(self._buf) + at if at >= 0 else -1
            self._buf += chunk
        if limit is not None and end > limit:
            raise too_long
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        message = json.loads(line)
        return message if isinstance(message, dict) else None


def connect(settings: Settings) -> Channel | None:
    """A channel to the service, or None when nothing listens."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_SECONDS)
    try:
        sock.connect(settings.socket_path)
    except OSError:
        sock.close()
        return None
    return Channel(sock)


# A service asked by another build steps aside: its last command and its snapshot take this long
# at most (as `service stop` waits); the service started in its place waits this long for its lock.
STEP_ASIDE_SECONDS = 10.0
# The service's argument for that: it takes over from one stepping aside (`spawn`, `successor`).
SUCCEED_ARG = "--succeed"
# A service's hello is a line of some 80 bytes: a listener sending more is not a service.
HELLO_BYTES = 1 << 16


def receive_hello(channel: Channel, settings: Settings) -> dict[str, Any] | None:
    """The service's first answer (None: it closed). A listener that is silent or answers what
    no octobrain service says (another program's, a leftover) raises TimeoutError or
    ValueError, and a service is started in its place unless a live one holds the lock: one
    that answered garbage was kept for good, every command run in-process, and one streaming
    bytes took the client 500 MB before its second was out."""
    try:
        return channel.recv(CONNECT_SECONDS, HELLO_BYTES)
    except (TimeoutError, ValueError):
        spawn(settings)
        raise


def ask(settings: Settings, op: str, timeout: float = ASK_SECONDS) -> dict[str, Any] | None:
    """A one-shot `status` or `stop` exchange; None when no compatible service answers."""
    channel = connect(settings)
    if channel is None:
        return None
    try:
        channel.send({"op": op, "protocol": PROTOCOL, "build": build_id()})
        hello = channel.recv(timeout, HELLO_BYTES)
        if hello is not None and not hello.get("accepted"):
            # A service of another build (or config) makes room for this one (only a `stop`
            # is refused: a `status` is answered by any build). `service stop` waits for it to
            # let go of its lock, once: this waited `STEP_ASIDE_SECONDS` first, and `stop` its
            # own ten seconds after that, 20 s for a service slow to go.
            return {"stopping": True, "pid": lock_holder(settings)} if op == "stop" else None
        if hello is None:
            return None
        return channel.recv(timeout)
    except (OSError, ValueError):
        return None
    finally:
        channel.sock.close()


def lock_holder(settings: Settings) -> int | None:
    """The pid the service holding the lock wrote in it (None: unknown)."""
    try:
        with open(settings.lock_path, "rb") as f:
            text = f.read(32).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def listening(settings: Settings) -> bool:
    """Whether anything accepts connections on the service's socket. A service exiting closes
    its listener first and lets go of its lock only once it has settled its stores; one stopped
    (SIGSTOP) or wedged keeps its listener, on which connections queue unanswered."""
    channel = connect(settings)
    if channel is None:
        return False
    channel.sock.close()
    return True


def lock_state(settings: Settings) -> str | None:
    """What the service holding this data dir's lock does, read once for one that gave no
    answer (None: no service holds the lock): "listening" (connections queue unanswered: it
    is stopped, SIGSTOP, or wedged), "stopping" (its listener closed, its socket file still
    there: it settles its stores, then removes the file and lets go) or "starting" (no socket
    file yet: it has just taken the lock, as a successor taking over from a service that
    stepped aside does, and binds its socket next)."""
    if not service_alive(settings):
        return None
    if listening(settings):
        return "listening"
    return "stopping" if os.path.exists(settings.socket_path) else "starting"


def service_alive(settings: Settings) -> bool:
    """Whether a service process holds this data dir's lock (it may still be starting)."""
    try:
        fd = os.open(settings.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True  # cannot tell: do not spawn
    try:
        return not take_lock(fd, 0.0)
    finally:
        os.close(fd)  # closing drops a lock we may have taken


def take_lock(fd: int, seconds: float) -> bool:
    """Whether this process took the lock on `fd` within `seconds` (0: at once or not)."""
    import fcntl

    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(0.05)


def took_lock(settings: Settings, fd: int, *, succeed: bool = False) -> bool:
    """Whether this service took the lock on `fd`: at once, or, to `succeed` the service
    stepping aside, within `STEP_ASIDE_SECONDS`, unless `service stop` asked that one to stop
    (`stop_asked`: the lock goes with this process, which serves nothing). A service started
    in the ordinary way (for a command that found none) clears that word: it is for successors."""
    waited = lock_holder(settings) if succeed else None
    if not take_lock(fd, STEP_ASIDE_SECONDS if succeed else 0.0):
        return False
    if not succeed:
        with contextlib.suppress(OSError):
            os.unlink(settings.stop_path)
        return True
    return not stop_asked(settings, waited)


def gone_by(settings: Settings, deadline: float, pid: int | None = None) -> bool:
    """Wait until the service `pid` (None: any) no longer holds this data dir's lock, or
    `deadline` (`time.monotonic`) passes; whether it is gone. The lock held under another pid
    is a successor's (`spawn`, `successor`), taken as soon as `pid` let go: waiting for a free
    lock, `service stop` called a service of another build stuck once it had stepped aside."""
    while service_alive(settings):
        holder = lock_holder(settings)
        if pid is not None and holder is not None and holder != pid:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# A successor takes `service stop`'s word only this fresh (a stale one, from before, names a
# pid since reused): it waited `STEP_ASIDE_SECONDS` at most, after its start.
STOP_WORD_SECONDS = 60.0


def mark_stopped(settings: Settings) -> None:
    """Leave word, before `service stop` asks, of the service it stops (the pid in the lock):
    a successor of a new build waiting for that one (`spawn`, `successor`) then does not take
    over (`stop_asked`). It did, once the old one let go, and ran on: the user asked for no
    service, and no command came after the stop (after an upgrade: a hook, then `service
    stop`, said "not running" or "stopped pid N", and the new build's service loaded)."""
    from pathlib import Path

    from octobrain.files import replace_whole

    pid = lock_holder(settings)
    if pid is not None:
        with contextlib.suppress(OSError):  # (then a successor may run on, as before)
            replace_whole(Path(settings.stop_path), str(pid).encode())


def stop_asked(settings: Settings, pid: int | None) -> bool:
    """Whether `service stop` asked the service `pid`, which a successor waited for, to stop
    (`mark_stopped`, `STOP_WORD_SECONDS` ago at most). The word stays, for every successor of
    that service (the first took it away, and a second, started by a command that reached the
    old service as it closed its listener, took over after the stop); a service started in the
    ordinary way clears it (`took_lock`)."""
    try:
        with open(settings.stop_path, "rb") as f:
            text, made = f.read(32).decode("ascii", "replace"), os.fstat(f.fileno()).st_mtime
    except OSError:
        return False
    fresh = abs(time.time() - made) <= STOP_WORD_SECONDS
    return pid is not None and fresh and text.strip() == str(pid)


# glibc's malloc raises its mmap threshold to the largest block freed (up to 32 MiB) and then
# keeps up to twice that free at the top of each thread's arena, which `malloc_trim` does not
# return. Lance and Arrow free such blocks on the service's many threads: at 100k memories the
# service held 150-280 MB of free heap after bench cold's commands. A fixed threshold (glibc's
# default value) hands every block of 128 KiB or more back to the system when it is freed.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def service_environment(settings: Settings) -> dict[str, str]:
    """The environment the service is started with: this one, with its locations resolved
    (it runs from /) and the allocator's settings, unless the user set their own, and without
    git's variables: it serves callers in many repositories (one that sets GIT_DIR and the
    like runs in-process, `launch.git_located`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # Named for the service when the user named one, or when there is one to read: naming a
    # missing default made the service warn "OCTOBRAIN_CONFIG_PATH: … does not exist" in
    # every answer, a warning the same command run in-process does not give.
    if os.environ.get("OCTOBRAIN_CONFIG_PATH", "").strip() or os.path.exists(settings.config_file):
        env["OCTOBRAIN_CONFIG_PATH"] = settings.config_file
    if env.get("OCTOBRAIN_DATA_DIR", "").strip():
        env["OCTOBRAIN_DATA_DIR"] = data_dir()
    if "malloc." not in env.get("GLIBC_TUNABLES", ""):
        for key, value in MALLOC_ENV.items():
            env.setdefault(key, value)
    return env


# The service a command starts waits to load until that command's process has exited (this end
# of a pipe closes with it), at most `SPAWNER_WAIT_SECONDS`, or until a client asks it for a
# command or a session. Loading at once cost the command that found no service about 0.4 s of
# its ~0.8 s on two cores: the two processes imported and loaded the same things side by side.
SPAWNER_FD_VAR = "OCTOBRAIN_SERVICE_SPAWNER_FD"
SPAWNER_WAIT_SECONDS = 3.0
_spawner_end: int | None = None


def spawn_at_exit(settings: Settings, *, successor: bool = False) -> None:
    """Start the service as this process ends, its command done (an `atexit` handler, run by
    `launch.exit_now` once the output is out), unless one is alive or another process is
    starting one. Its start then takes nothing from the command's: a service started with
    the command, even one waiting to load, cost it its interpreter's start and imports on the
    second core (0.1 s of the first command's 0.7 s). The spawn lock is taken now, so a command
    started meanwhile runs in-process rather than starting a second service. A `successor`
    takes over from the service that refused this command and is stepping aside (another
    build, a changed config): it waits for that one's lock. The command that found the old
    one started none, nor did the next if the old one still held its lock: after an upgrade,
    the first two commands ran in-process, the old service's step-aside between them."""
    import atexit

    if _hold(settings.spawn_lock_path) and (successor or not service_alive(settings)):
        atexit.register(_spawn_if_configured, settings, successor=successor)


def _spawn_if_configured(
    settings: Settings, lock: str | None = None, *, successor: bool = False
) -> bool:
    """`spawn` at exit (or now, for a burst: `connect_starting`), unless the config it would
    run with cannot be loaded: a command refused for a bad value
    (`OCTOBRAIN_SEARCH_MIN_RELEVANCE=xyz`) started a service that failed to warm up and held
    80–350 MB for its idle time, reported "store loaded"."""
    import logging

    from octobrain.config import load_config
    from octobrain.errors import InvalidInput

    said = logging.getLogger("octobrain.config")  # (the command said what is wrong with it)
    was, said.disabled = said.disabled, True
    try:
        load_config()
    except (InvalidInput, OSError):
        return False
    finally:
        said.disabled = was
    return spawn(settings, load_now=True, lock=lock, successor=successor)


_held: dict[str, int] = {}  # lock file → its descriptor, held until this process exits


def _hold(path: str) -> bool:
    """Hold the lock at `path` until this process exits; False when another process holds it."""
    import fcntl

    if path not in _held:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        _held[path] = fd
    return True


def spawn(
    settings: Settings,
    *,
    load_now: bool = False,
    lock: str | None = None,
    successor: bool = False,
) -> bool:
    """Start the service detached unless one is alive or another process is starting one
    (holds the spawn lock, or `lock`). It loads once this process exits (see
    `SPAWNER_WAIT_SECONDS`), or at once with `load_now` (`service start`, which waits for it;
    `spawn_at_exit`, whose process is ending; `connect_starting`, which waits for it). A
    `successor` is started while one is alive: it waits for that one, stepping aside, to let go
    of the lock (`STEP_ASIDE_SECONDS` at most), then serves."""
    global _spawner_end
    import subprocess

    if not _hold(lock or settings.spawn_lock_path) or (not successor and service_alive(settings)):
        return False
    env = service_environment(settings)
    env.pop(SPAWNER_FD_VAR, None)
    ends: tuple[int, int] | None = None
    if not load_now and _spawner_end is None:
        with contextlib.suppress(OSError):
            ends = os.pipe()  # (neither end is inherited by this process's other children)
            env[SPAWNER_FD_VAR] = str(ends[0])
    # (a successor's lines follow those of the service it replaces, still being written)
    fresh = 0 if successor else os.O_TRUNC
    log = os.open(settings.log_path, os.O_WRONLY | os.O_CREAT | fresh | os.O_APPEND, 0o600)
    # (faulthandler: killed by a signal, a SIGBUS from a mapped snapshot file cut in place, it
    # leaves every thread's stack in its log, not nothing)
    argv = [sys.executable, "-X", "faulthandler", "-m", "octobrain.cli.service_daemon"]
    try:
        subprocess.Popen(
            [*argv, SUCCEED_ARG] if successor else argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd="/",
            start_new_session=True,
            pass_fds=ends[:1] if ends else (),
        )
    except OSError:
        if ends is not None:
            os.close(ends[1])
        return False
    finally:
        os.close(log)
        if ends is not None:
            os.close(ends[0])
    if ends is not None:
        _spawner_end = ends[1]  # held until this process exits: then the service loads
    return True


# A command that finds no service while one is being started waits this long for its socket
# (then the usual handshake, `service.wait_seconds` for `ready`), about what the command takes
# run in-process on its own, rather than loading the model and the store beside that service.
STARTING_SECONDS = 1.0


def connect_starting(settings: Settings) -> Channel | None:
    """A channel to a service being started, for a command that found no socket answering
    (None: run in-process). A service that holds the lock and has not bound its socket yet
    is waited for. So is one started now when another command holds the spawn lock: a burst
    of hooks after the service went away (SessionStart, UserPromptSubmit, PostToolUse within
    a second) loaded the model and the store once per command, side by side on the same
    cores, where the first command alone runs in-process and starts the service as it exits.
    Not a service whose socket refuses (it is stopping, or died), nor for longer than
    `STARTING_SECONDS`."""
    if not service_alive(settings):
        if _hold(settings.spawn_lock_path):
            return None  # the first: it runs here and starts the service as it exits
        # One of the burst starts it (the start lock); the others wait for its socket too.
        start = settings.start_lock_path
        if (
            _hold(start)
            and not _spawn_if_configured(settings, start)
            and not service_alive(settings)
        ):
            return None  # none could be started (a config it cannot run with: the command says)
    deadline = time.monotonic() + STARTING_SECONDS
    refused = 0
    while True:
        channel = connect(settings)
        if channel is not None:
            return channel
        refused = refused + 1 if os.path.exists(settings.socket_path) else 0
        if refused > 1 or time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
