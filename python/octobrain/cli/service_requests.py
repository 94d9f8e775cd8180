"""What the resident service (`service_daemon.Service`) does with one connection: it reads the
request, answers a client of another build or config by stepping aside (a new service takes
its place), and otherwise answers `status` or `stop`, runs a command in its turn (the client
says `go` once it is ready to wait for the answer), or hosts a relayed MCP session."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
from typing import Any

from octobrain.cli import library_log
from octobrain.cli.service_client import PROTOCOL, Channel
from octobrain.cli.service_command import alive, await_go, prefetch, run_command, well_formed
from octobrain.cli.service_settings import Settings, data_dir, environment_marks
from octobrain.cli.service_stores import BrainCache
from octobrain.config.loader import MAX_CONFIG_BYTES
from octobrain.files import read_regular
from octobrain.heap import resident_bytes, trim_heap

log = logging.getLogger("octobrain.cli.service_daemon")  # the service's own log (its log file)
REQUEST_SECONDS = 5.0
# A request is a command line and a hook's JSON: a line without end is dropped past this.
REQUEST_BYTES = 16 << 20
GO_SECONDS = 10.0


def config_stamp(path: str) -> str | None:
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


class Requests:
    """The answers of `service_daemon.Service`, which sets this state up and keeps it."""

    settings: Settings
    build: str
    config_stamp: str | None
    caller_log: library_log.CallerStderr | None  # where a command's library warnings go
    run_lock: threading.Lock  # one command (or load, or maintenance) at a time
    state_lock: threading.Lock  # the counts below
    active: int  # connections open
    served: int
    sessions: int  # MCP sessions being hosted
    started: float
    last_request: float
    stopping: threading.Event
    wanted: threading.Event  # (set: load now)
    configured: threading.Event  # the config was read (`cache` set if valid)
    cache: BrainCache | None
    loaded: bool

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
        if config_stamp(self.settings.config_file) != self.config_stamp:
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
                result = run_command(request, self.cache, self.caller_log)
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
