"""One command line run in the resident service as `octobrain` would run it in a new process:
the request checked for an octobrain client's form (`well_formed`), the command run with the
caller's stdin, stdout, stderr, working directory and terminal width (`run_command`), the
beats that tell the client it still runs (`alive`), the wait for its `go` (`await_go`), and a
digest hook's transcript read before the command's turn (`prefetch`).
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import io
import logging
import os
import re
import socket
import struct
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, TypeGuard

# (registers the error handler a caller whose stdout lacks characters names: `streams`)
from octobrain.cli import streams  # noqa: F401
from octobrain.cli.service_client import ALIVE_EVERY_SECONDS, PROTOCOL, Channel

if TYPE_CHECKING:
    from octobrain.cli import library_log
    from octobrain.cli.service_stores import BrainCache

log = logging.getLogger(__name__)  # to the service's log file (`service_daemon.main`)


@contextlib.contextmanager
def alive(channel: Channel) -> Any:
    """Tell the client every `ALIVE_EVERY_SECONDS` that its command still runs, until the
    block ends (then the result follows): a client that hears nothing knows this process is
    stopped or stuck, not busy."""
    done = threading.Event()

    def beat() -> None:
        while not done.wait(ALIVE_EVERY_SECONDS):
            try:
                channel.send({"alive": True})
            except OSError:
                return  # the client left; the command still finishes

    beating = threading.Thread(target=beat, name="octobrain-alive", daemon=True)
    beating.start()
    try:
        yield
    finally:
        done.set()
        beating.join()


# How often the service, holding the run lock for a client that has not said `go`, looks
# whether that client was stopped.
GO_LOOK_SECONDS = 0.05


def await_go(channel: Channel, seconds: float, limit: int) -> dict[str, Any] | None:
    """The client's answer to `ready` (it holds the run lock meanwhile) within `seconds`, or
    None at once when the client is stopped (Ctrl-Z, SIGSTOP, a debugger): every command
    behind it waited out the whole wait, and went in-process. Resumed, it finds the
    connection closed and runs its command itself, as one that tired of waiting does."""
    pid = _peer_pid(channel.sock)
    deadline = time.monotonic() + seconds
    while True:
        try:
            return channel.recv(seconds if pid is None else GO_LOOK_SECONDS, limit)
        except TimeoutError:
            if time.monotonic() >= deadline or (pid is not None and _stopped(pid)):
                return None


def _peer_pid(sock: socket.socket) -> int | None:
    """The pid of the process that connected `sock` (Linux's SO_PEERCRED), else None."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid: int = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))[0]
    except (OSError, struct.error):
        return None
    return pid if pid > 0 else None  # (0: a process of another pid namespace)


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped: state T (a stop signal) or t (a debugger) in
    /proc/PID/stat, after its name in parentheses (which may hold any character)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(4096)
    except OSError:
        return False
    at = stat.rfind(b")")
    return at >= 0 and stat[at + 2 : at + 3] in (b"T", b"t")


_OPS = ("run", "status", "stop", "mcp")
_BUILD = re.compile(r"[0-9a-f]{24}")


def well_formed(request: object) -> TypeGuard[dict[str, Any]]:
    """Whether `request` is what an octobrain client sends: an op it knows, an integer
    protocol and a build fingerprint (a client of another build passes this, and makes the
    service step aside); for a command of this protocol, fields of the right types and
    stream encodings Python knows."""
    if not isinstance(request, dict) or request.get("op") not in _OPS:
        return False
    protocol, build = request.get("protocol"), request.get("build")
    if isinstance(protocol, bool) or not isinstance(protocol, int):
        return False
    if not isinstance(build, str) or not _BUILD.fullmatch(build):
        return False
    if protocol != PROTOCOL or request["op"] != "run":
        return request["op"] != "mcp" or isinstance(request.get("cwd"), str)
    argv, stdin, columns = request.get("argv"), request.get("stdin"), request.get("columns")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return False
    if not isinstance(request.get("prog"), str) or not isinstance(request.get("cwd"), str):
        return False
    if not (stdin is None or isinstance(stdin, str)) or isinstance(columns, bool):
        return False
    if not isinstance(columns, int):
        return False
    try:
        for tag in ("in", "out", "err"):
            for key, look_up in (("enc", codecs.lookup), ("errors", codecs.lookup_error)):
                value = request.get(f"{tag}_{key}")
                if value is not None:
                    look_up(value)
    except (LookupError, TypeError):
        return False
    return True


def prefetch(request: dict[str, Any]) -> None:
    """Read a digest hook's transcript before waiting for the run lock: reading is the
    slow part (up to 3 s for the `READ_BYTES` one hook reads) and touches no store, so it
    must not hold up the commands and MCP calls queued behind it. The command finds the
    part already read (`transcript_parts.transcript_part`, from where the session's last
    hook stopped); a client that tires of waiting runs it itself."""
    argv = request.get("argv")
    if not isinstance(argv, list) or argv[:1] != ["hook"]:
        return
    if not set(argv[1:]) & {"pre-compact", "session-end"}:
        return
    from octobrain.memory.hooks import hook_text, parse_hook_input
    from octobrain.memory.transcript_file import start_of
    from octobrain.memory.transcript_parts import transcript_part

    try:
        stdin = base64.b64decode(request["stdin"]) if request.get("stdin") else b""
        data = parse_hook_input(hook_text(stdin))
        if data.transcript_path:
            where = os.path.join(str(request["cwd"]), data.transcript_path)
            start = start_of(data.tag, where, None, None)
            transcript_part(where, data.cwd, start)
    except Exception:  # the command itself reports what is wrong, as it would in-process
        log.debug("transcript prefetch failed", exc_info=True)


def run_command(
    request: dict[str, Any],
    cache: BrainCache | None,
    library: library_log.CallerStderr | None,
) -> dict[str, Any]:
    """Run one command line as `octobrain` would, capturing its streams and exit code, then
    `cache.flush()`; `library`: where this thread's library warnings go."""
    from octobrain.cli.main import main

    stdin = base64.b64decode(request["stdin"]) if request.get("stdin") else b""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    saved_cwd, saved_columns = os.getcwd(), os.environ.get("COLUMNS")
    code: Any = 0
    try:
        os.chdir(request["cwd"])
        os.environ["COLUMNS"] = str(int(request.get("columns", 80)))
        sys.stdin = reader(stdin, request.get("in_enc"), request.get("in_errors"))
        sys.stdout = out_text = _writer(out, request.get("out_enc"), request.get("out_errors"))
        sys.stderr = err_text = _writer(err, request.get("err_enc"), request.get("err_errors"))
        if library is not None:  # this thread's library warnings are the caller's
            library.command_thread = threading.get_ident()
        try:
            main.main(args=list(request["argv"]), prog_name=str(request["prog"]))
        except SystemExit as exc:
            code = exc.code
        except Exception:  # what an uncaught error prints in a new process
            sys.stderr.write("".join(traceback.format_exc()))
            code = 1
        finally:
            if library is not None:
                library.command_thread = None
            if cache is not None:
                cache.flush()
        out_text.flush()
        err_text.flush()
        out_text.detach()  # the buffers outlive their text wrappers
        err_text.detach()
    except OSError as exc:  # e.g. the caller's cwd is gone
        err.write(f"error: cwd: {exc}\n".encode())
        code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(saved_cwd)
        if saved_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved_columns
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message") prints it and exits 1
        err.write(f"{code}\n".encode())
        code = 1
    return {
        "stdout": base64.b64encode(out.getvalue()).decode(),
        "stderr": base64.b64encode(err.getvalue()).decode(),
        "exit": code,
    }


def reader(data: bytes, encoding: object, errors: object) -> io.TextIOWrapper:
    """The caller's stdin as its own process would decode it (`surrogateescape` under a C
    or POSIX locale)."""
    return io.TextIOWrapper(
        io.BytesIO(data),
        encoding=encoding if isinstance(encoding, str) else "utf-8",
        errors=errors if isinstance(errors, str) else "strict",
    )


def _writer(buffer: io.BytesIO, encoding: object, errors: object) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        buffer,
        encoding=encoding if isinstance(encoding, str) else "utf-8",
        errors=errors if isinstance(errors, str) else "strict",
        write_through=True,
    )
