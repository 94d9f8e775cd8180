"""The resident service: one warm process per data directory answering CLI memory and
knowledge commands, `brief` and the hooks over a Unix socket (`cli.service_client` is the
client), and hosting the MCP sessions `octobrain mcp` relays to it (`octobrain.server.hosted`)
on the same Brains.

It runs the very same click commands as a new process would, with stdin, stdout, stderr, the
working directory and the terminal width of the caller, so the output is the same byte for
byte; what it saves is the imports, the model load and the mirror build. Commands run one at a
time (as in the MCP server's pool); the store's own locks and version checks keep other
processes' writes visible, exactly as between two CLI processes.

Started on demand by the first command that finds no service (detached, as `python -m
octobrain.cli.service_daemon`), it holds `<key>.lock` for its whole life, so at most one runs
per data directory, and exits after `service.idle_seconds` without a request, when the config
file changes, or when a client of another build asks (the newer install then starts its own).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from octobrain.cli import library_log, service_command
from octobrain.cli.service_client import (
    PROTOCOL,
    SPAWNER_FD_VAR,
    SPAWNER_WAIT_SECONDS,
    SUCCEED_ARG,
    Channel,
    build_id,
)
from octobrain.cli.service_command import alive, await_go, prefetch, run_command, well_formed
from octobrain.cli.service_place import Place
from octobrain.cli.service_settings import Settings, data_dir, environment_marks, load_settings
from octobrain.cli.service_stores import BrainCache
from octobrain.config.loader import MAX_CONFIG_BYTES
from octobrain.files import read_regular
from octobrain.heap import resident_bytes, trim_heap

log = logging.getLogger("octobrain.cli.service_daemon")
_LIBRARY_LOG: library_log.CallerStderr | None = None  # set by `main`
REQUEST_SECONDS = 5.0
# A request is a command line and a hook's JSON: a line without end is dropped past this.
REQUEST_BYTES = 16 << 20
ACCEPT_BACKOFF_SECONDS = 0.2  # after a failed accept (no descriptor left) before the next
GO_SECONDS = 10.0
QUIET_SECONDS = 1.0  # without a request after the load, before the knowledge tables are read in


def _config_stamp(path: str) -> str | None:
    """A digest of the config file's content (None: absent). Its mtime and size missed an
    edit of the same length whose mtime was put back (`touch -d`, `cp -p`, a coarse clock):
    the service answered with the old config. A config is a few kB: reading it costs ~20 µs."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES)[0]
    except FileNotFoundError:
        return None
    except OSError as exc:  # (unreadable, or too large: the next command says why)
        return f"{type(exc).__name__}: {exc}"
    return hashlib.sha256(data).hexdigest()


class Service:
    """The accept loop, the one-at-a-time executor and the idle clock."""

    def __init__(self, settings: Settings, spawner_fd: int | None = None) -> None:
        self.settings = settings
        self.build = build_id()
        self.config_stamp = _config_stamp(settings.config_file)
        self.run_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.active = 0
        self.served = 0
        self.started = time.time()
        self.last_request = time.monotonic()
        self.stopping = threading.Event()
        self.cache: BrainCache | None = None
        self.configured = threading.Event()  # the config was read (self.cache set if valid)
        self.loaded = False  # warm-up done: the model, the store and its mirror are in memory
        self.loaded_at = float("inf")
        self.knowledge_warmed = False  # (started)
        # Set: load now (no process started this one and waits, it is done, or a client asks).
        self.wanted = threading.Event()
        if spawner_fd is None:
            self.wanted.set()
        else:
            threading.Thread(
                target=self._watch_spawner,
                args=(spawner_fd,),
                name="octobrain-spawner",
                daemon=True,
            ).start()
        self.sessions = 0  # MCP sessions being hosted
        self.lost_place: Callable[[], str | None] | None = None  # (`service_place.Place.lost`)

    # ---- lifecycle --------------------------------------------------------------------

    def prepare(self) -> None:
        """Import the command line and load the model and the store (in the background), once
        the command that started this service is done (`service_client.SPAWNER_WAIT_SECONDS`)
        or a client wants a command run or a session hosted."""
        with self.run_lock:  # (commands wait for the load, as always)
            self.wanted.wait(SPAWNER_WAIT_SECONDS)
            self.wanted.set()
            if not self.stopping.is_set():  # (asked to stop or step aside first: no load)
                self._load()
            self.configured.set()

    def _watch_spawner(self, fd: int) -> None:
        """Let the load begin when the process that started this one exits (its end of the
        pipe closes; it never writes)."""
        with contextlib.suppress(OSError):
            os.read(fd, 1)
        with contextlib.suppress(OSError):
            os.close(fd)
        self.wanted.set()

    def _load(self) -> None:
        from octobrain.cli.common import Warm
        from octobrain.config import load_config
        from octobrain.memory.corpus import Corpus
        from octobrain.store.memories import MemoryStore

        MemoryStore.defer_maintenance = True  # run after answers (`_maintain`), not within them
        Corpus.leave_tails = False  # (a whole snapshot as it exits: `settle`)
        MemoryStore.keeps_access = False  # (its calls' access counts: committed after each)
        stamp = _config_stamp(self.settings.config_file)
        try:
            try:
                cache = BrainCache(load_config(), self.run_lock)
                self._loaded_stamp(stamp)
                Warm.brain, Warm.knowledge = cache.brain, cache.knowledge
                self.cache = cache
            finally:
                self.configured.set()
            import octobrain.cli.main  # noqa: F401  (the commands, imported once)

            brain = cache.brain("", Path("/"))
            brain.warm_up()
            # LanceDB open for the first write (a mirror a current snapshot opened reads on
            # without it while nothing changes, `corpus_snapshot.unchanged_on_disk`).
            brain.store.open()
            brain.remember("warm up", record_access=False)  # builds what a search needs
            cache.flush()  # the store's files as opened (a first open creates the tables)
            trim_heap()
        except Exception:  # a bad config or store is reported by the first command
            log.warning("warm-up failed", exc_info=True)
        finally:
            self.loaded, self.loaded_at = True, time.monotonic()

    def _quiet(self) -> bool:
        """Whether no command has run for `QUIET_SECONDS`, nor runs, since the load: when the
        knowledge tables are read in (`BrainCache.warm_knowledge`). Beside a command, that
        took half of its turns at the interpreter (a first `memory remember` 0.08 → 0.3 s)."""
        with self.state_lock:
            since = time.monotonic() - max(self.last_request, self.loaded_at)
        return since >= QUIET_SECONDS and not self.run_lock.locked()

    @staticmethod
    def _warm_rest(cache: BrainCache) -> None:
        """What no memory command needs, once the service is quiet (`_quiet`): the MCP SDK
        for hosted sessions (0.8 s of a 2.3 s load on a busy 2-core machine, which the
        commands sent while it loaded waited for; a session that comes first imports it
        itself) and the knowledge tables."""
        with contextlib.suppress(ImportError):
            import octobrain.server.hosted  # noqa: F401
        cache.warm_knowledge()

    def _loaded_stamp(self, stamp: str | None) -> None:
        """Take `stamp` (the config's digest read just before the config was loaded) as this
        service's config: the digest taken as it started missed an edit made before the load,
        up to `SPAWNER_WAIT_SECONDS` later, and retired the service at its first command for
        the config it had read. An edit after `stamp` was read still retires it. Not when the
        edit changed the service's own settings (its idle time): it retires for those."""
        settings = load_settings()
        if settings is not None and all(
            getattr(settings, name) == getattr(self.settings, name) for name in Settings.__slots__
        ):
            self.config_stamp = stamp

    def serve(self, listener: socket.socket, release: Callable[[], None] | None = None) -> None:
        """Accept until idle or stopped; then `release` the socket and the lock (a new service
        may start), let the running command finish and the hosted MCP sessions end."""
        threading.Thread(target=self.prepare, daemon=True).start()
        listener.settimeout(0.2)
        try:
            self._accept(listener)
        finally:
            listener.close()  # new clients now run in-process; let the running command finish
            with self.state_lock:
                idle = self.active == 0
            if idle:  # (before a new service may start, so that it opens what this one left)
                self._settle()
            if release is not None:
                release()
            deadline = time.monotonic() + 600.0
            while True:
                with self.state_lock:
                    if self.active == 0 or (self.sessions == 0 and time.monotonic() > deadline):
                        break
                time.sleep(0.05)
            if not idle:
                self._settle()

    def _settle(self) -> None:
        """Leave each store as the next new process reads it best (`BrainCache.settle`)."""
        cache = self.cache
        if cache is not None and self.run_lock.acquire(timeout=60.0):
            try:
                cache.settle()
            finally:
                self.run_lock.release()

    def _accept(self, listener: socket.socket) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                with self.state_lock:
                    idle = self.active == 0 and (
                        time.monotonic() - self.last_request > self.settings.idle_seconds
                    )
                lost = self.lost_place() if self.lost_place is not None else None
                if lost is not None:  # unreachable, or another service took over: step aside
                    log.warning("stopping: %s", lost)
                if idle or lost is not None:
                    return
                cache = self.cache
                if cache is not None and cache.maintenance_due():  # e.g. after MCP calls
                    threading.Thread(target=self._maintain, daemon=True).start()
                if cache is not None and not self.knowledge_warmed and self._quiet():
                    self.knowledge_warmed = True
                    threading.Thread(target=self._warm_rest, args=(cache,), daemon=True).start()
                continue
            except OSError as exc:  # out of descriptors (a flood of connections): wait them out
                log.warning("cannot accept a connection now: %s", exc)
                self.stopping.wait(ACCEPT_BACKOFF_SECONDS)
                continue
            with self.state_lock:
                self.active += 1  # (idle again only once no connection is open)
            try:
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
            except RuntimeError:  # no thread to be had: this client runs its command itself
                conn.close()
                with self.state_lock:
                    self.active -= 1

    def status(self) -> dict[str, Any]:
        from octobrain import __version__

        with self.state_lock:
            idle_for = time.monotonic() - self.last_request
            return {
                "pid": os.getpid(),
                "version": __version__,
                "build": self.build,
                "started": self.started,
                "served": self.served,
                "busy": self.active > 1,
                "idle_seconds": self.settings.idle_seconds,
                "idle_for": idle_for,
                "loaded": self.loaded,
                "waiting": not self.wanted.is_set(),
                "mcp_sessions": self.sessions,
                "socket": str(self.settings.socket_path),
                "config": str(self.settings.config_file),
                "data_dir": data_dir(),
                "environment": environment_marks(),  # (no values: they may be credentials)
                "stale": self._refusal({"protocol": PROTOCOL, "build": self.build}),
                "rss_mb": (resident_bytes() or 0) / (1 << 20),
            }

    # ---- one connection ------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        channel = Channel(conn)
        worked = [False]  # (a command or an MCP session: what keeps the service wanted)
        try:
            self._exchange(channel, worked)
        except (OSError, ValueError):
            pass  # the client went away or spoke nonsense: nothing was run for it
        except Exception:  # a malformed request; the service itself carries on
            log.exception("request failed")
        finally:
            conn.close()
            with self.state_lock:
                self.active -= 1
                if worked[0]:  # a `status` asked every few seconds kept it from idling out
                    self.last_request = time.monotonic()

    def _refusal(self, request: dict[str, Any]) -> str | None:
        """Why this service must make room for a new one (None: it answers). Only a request
        that looks like one from an octobrain client counts: anything else is dropped."""
        if request.get("protocol") != PROTOCOL or request.get("build") != self.build:
            return "another build of octobrain"
        if _config_stamp(self.settings.config_file) != self.config_stamp:
            return "the config file changed"
        return None

    def _exchange(self, channel: Channel, worked: list[bool]) -> None:
        channel.sock.settimeout(REQUEST_SECONDS)
        if not channel.sock.recv(1, socket.MSG_PEEK):
            return  # the client left before asking (killed, or a Ctrl-C as it connected)
        request = channel.recv(REQUEST_SECONDS, REQUEST_BYTES)
        if not well_formed(request):
            log.warning("dropped a request that is not an octobrain client's")
            return
        # Asked what it is, it answers whoever asks (`service status --all` asks every service
        # of the user): a status of another build or config made it step aside.
        refusal = None if request.get("op") == "status" else self._refusal(request)
        channel.send({"protocol": PROTOCOL, "build": self.build, "accepted": refusal is None})
        if refusal is not None:  # a newer install or config wants a new service: make room
            log.info("stopping: %s", refusal)
            self.stopping.set()
            return
        op = request.get("op")
        if op in ("run", "mcp"):
            self.wanted.set()  # someone waits for this service: load now
            worked[0] = True
        if op == "status":
            channel.send(self.status())
            return
        if op == "stop":
            channel.send({"stopping": True, "pid": os.getpid()})
            self.stopping.set()
            return
        if op == "mcp":
            self._mcp(channel, request)
            return
        if op != "run":
            return
        prefetch(request)
        with self._knowledge_turn(request) as had:
            result = self._run(channel, request) if had else None
        if result is None:
            return  # the client gave up waiting, or is stopped: it runs the command itself
        channel.send(result)
        self._maintain()
        trim_heap()

    def _knowledge_turn(self, request: dict[str, Any]) -> contextlib.AbstractContextManager[bool]:
        """For a knowledge command, its store's knowledge lock, taken before the run lock
        (`BrainCache.knowledge_turn`): whether it was had in time; for any other, nothing."""
        if request["argv"][:1] != ["knowledge"]:
            return contextlib.nullcontext(True)
        cache = self.cache if self.configured.wait(self.settings.wait_seconds) else None
        if cache is None:  # (not loaded in time, or a bad config: no knowledge lock to take)
            return contextlib.nullcontext(True)
        return cache.knowledge_turn(str(request["cwd"]), self.settings.wait_seconds)

    def _run(self, channel: Channel, request: dict[str, Any]) -> dict[str, Any] | None:
        """Take the run lock, say `ready`, and run the command once the client says `go`; its
        result (None: not run)."""
        with self.run_lock:
            if self.stopping.is_set():
                return None
            channel.send({"ready": True})
            if await_go(channel, GO_SECONDS, REQUEST_BYTES) != {"go": True}:
                return None
            channel.send({"running": True})
            with alive(channel):
                result = run_command(request, self.cache, _LIBRARY_LOG)
            with self.state_lock:
                self.served += 1
        return result

    def _maintain(self) -> None:
        """Store maintenance that a write fell due for, run once the answer is out and no
        command runs (after a command, and on an idle tick of the accept loop)."""
        cache = self.cache
        if cache is None or not self.run_lock.acquire(blocking=False):
            return
        try:
            cache.maintain()
        except Exception:  # the next command reports a store that cannot be maintained
            log.warning("store maintenance failed", exc_info=True)
        finally:
            self.run_lock.release()

    def _mcp(self, channel: Channel, request: dict[str, Any]) -> None:
        """Host one relayed `octobrain mcp` session; closing without `{"mcp": true}` tells the
        client to serve itself (a bad config, an HTTP bind, a cwd that cannot be read)."""
        cwd = request.get("cwd")
        if not self.configured.wait(self.settings.wait_seconds) or not isinstance(cwd, str):
            return
        cache = self.cache
        if cache is None or cache.config.mcp.bind:
            return
        from octobrain.server.hosted import host_session, prepare_session

        try:
            octo = prepare_session(cache.pool(cwd), cwd)
        except OSError:
            return
        if channel.pending():
            return  # the client may send protocol bytes only after the answer
        channel.send({"mcp": True})
        with self.state_lock:
            self.sessions += 1
        try:
            host_session(octo, channel.sock)
        finally:
            with self.state_lock:
                self.sessions -= 1


def _spawner_fd() -> int | None:
    """The read end of the pipe whose other end the process that started this service holds
    (`service_client.spawn`); taken out of the environment the commands run in."""
    import stat

    raw = os.environ.pop(SPAWNER_FD_VAR, "")
    if not raw.isdigit():
        return None
    fd = int(raw)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
    except OSError:
        return None
    return fd


def run_service(settings: Settings, *, succeed: bool = False) -> int:
    """Serve until idle; 0 also when another service already holds the lock (one started to
    `succeed` a service stepping aside waits for it, `STEP_ASIDE_SECONDS` at most)."""
    place = Place.take(settings, succeed=succeed)
    if place is None:
        return 0  # another service is alive (or starting): it answers
    if succeed:
        log.info("took over from the service that stepped aside")
    service = Service(settings, _spawner_fd())
    service.lost_place = place.lost
    try:
        service.serve(place.listener, place.release)
    finally:
        place.listener.close()
        place.release()
    return 0


def main() -> int:
    # The service's own log goes to its log file (its stderr); library warnings reach the
    # stderr of the command that caused them, as in a new process. What the hosted MCP
    # sessions and the shared pool log goes to the log file: a CLI command running at the same
    # time must not get another session's warnings on its stderr (`library_log`).
    global _LIBRARY_LOG
    handler = library_log.CappedLog(sys.stderr)  # (within library_log.LOG_BYTES)
    handler.setFormatter(  # a log read with `tail -f` must not carry a PDF's escape sequences
        library_log.PrintableFormatter(
            "%(asctime)s octobrain-service %(levelname)s %(name)s: %(message)s"
        )
    )
    for name in (
        "octobrain.cli.service_daemon",
        "octobrain.server",
        "mcp",
        service_command.__name__,
    ):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False
    for own in (log, service_command.log):
        own.setLevel(logging.INFO)
    _LIBRARY_LOG = library_log.install(elsewhere=handler)
    settings = load_settings()
    if settings is None or not settings.enabled:
        return 0
    return run_service(settings, succeed=SUCCEED_ARG in sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
