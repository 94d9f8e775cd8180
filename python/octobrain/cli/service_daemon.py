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
What it answers on each connection is `cli.service_requests`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from octobrain.cli import library_log, service_command
from octobrain.cli.service_client import SPAWNER_FD_VAR, SPAWNER_WAIT_SECONDS, SUCCEED_ARG, build_id
from octobrain.cli.service_place import Place
from octobrain.cli.service_requests import Requests, config_stamp
from octobrain.cli.service_settings import Settings, load_settings
from octobrain.cli.service_stores import BrainCache
from octobrain.heap import trim_heap

log = logging.getLogger("octobrain.cli.service_daemon")
ACCEPT_BACKOFF_SECONDS = 0.2  # after a failed accept (no descriptor left) before the next
QUIET_SECONDS = 1.0  # without a request after the load, before the knowledge tables are read in


class Service(Requests):
    """The load, the accept loop and the idle clock; what it answers on each connection is
    `service_requests.Requests`."""

    def __init__(
        self,
        settings: Settings,
        spawner_fd: int | None = None,
        caller_log: library_log.CallerStderr | None = None,
    ) -> None:
        self.settings = settings
        self.build = build_id()
        self.config_stamp = config_stamp(settings.config_file)
        self.caller_log = caller_log
        self.run_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.active = 0
        self.served = 0
        self.started = time.time()
        self.last_request = time.monotonic()
        self.stopping = threading.Event()
        self.cache = None
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
        stamp = config_stamp(self.settings.config_file)
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


def run_service(
    settings: Settings,
    *,
    succeed: bool = False,
    caller_log: library_log.CallerStderr | None = None,
) -> int:
    """Serve until idle; 0 also when another service already holds the lock (one started to
    `succeed` a service stepping aside waits for it, `STEP_ASIDE_SECONDS` at most)."""
    place = Place.take(settings, succeed=succeed)
    if place is None:
        return 0  # another service is alive (or starting): it answers
    if succeed:
        log.info("took over from the service that stepped aside")
    service = Service(settings, _spawner_fd(), caller_log)
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
    caller_log = library_log.install(elsewhere=handler)
    settings = load_settings()
    if settings is None or not settings.enabled:
        return 0
    return run_service(settings, succeed=SUCCEED_ARG in sys.argv[1:], caller_log=caller_log)


if __name__ == "__main__":
    sys.exit(main())
