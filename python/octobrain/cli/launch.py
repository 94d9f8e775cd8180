"""The `octobrain` entry point: hand a command to the resident service, if any, else run it here.

A warm service (`octobrain.cli.service_daemon`) answers `memory …`, `knowledge …` (not those
that fetch a URL, index a file or read stdin), `hook …` and `brief`, and
hosts `octobrain mcp` sessions, without this process importing LanceDB, numpy, the MCP SDK or
the model, so this module and the two it uses import the standard library only. Anything it is
unsure about — the service is off, absent, refuses, is wedged, or is of another build — runs in
this process instead (`octobrain.cli.main`), with the same output.
"""

from __future__ import annotations

import _thread
import contextlib
import errno
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

import octobrain
from octobrain.cli.mcp_relay import run_mcp
from octobrain.cli.service_client import HOOK_INPUT_BYTES
from octobrain.cli.service_run import Fallback, run_remote
from octobrain.cli.service_settings import load_settings
from octobrain.cli.streams import escape_what_stdout_cannot_encode

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import FrameType
    from typing import NoReturn

# Subcommands the service answers: quick, non-interactive, output on stdout/stderr only.
_MEMORY = {"memorize", "remember", "get", "recent", "stats", "relate", "unrelate", "graph",
           "update", "forget"}  # fmt: skip
_HOOKS = {"session-start", "pre-compact", "session-end"}
# `index` runs here, as `memory ingest` does: a progress bar on this terminal, and a Ctrl-C
# that stops it (the service cannot stop a command midway). See `_knowledge_routable` too.
_KNOWLEDGE = {"search", "read", "match", "list", "stats", "store", "delete", "delete-source"}


# Of those, the ones that embed text as soon as they run (`_load_model_ahead`).
_EMBEDDING = {("memory", "remember"), ("memory", "memorize"), ("memory", "update"),
              ("hook", "pre-compact"), ("hook", "session-end")}  # fmt: skip

# Of those, the ones this process runs itself when the service stops during them: they only
# read (`remember` apart from its access counts), or find and refresh their session's one
# digest under the write lock, so a second run changes nothing the first may have done. A
# SessionEnd hook does not fire again: without this its digest was lost with the service.
_REPEATABLE = {("brief", ""), ("hook", "session-start"), ("hook", "pre-compact"),
               ("hook", "session-end"), ("memory", "remember"), ("memory", "get"),
               ("memory", "recent"), ("memory", "stats"), ("memory", "graph"),
               ("knowledge", "search"), ("knowledge", "read"), ("knowledge", "match"),
               ("knowledge", "list"), ("knowledge", "stats")}  # fmt: skip


def command_of(args: list[str]) -> tuple[str, str] | None:
    """`(group, command)` of a command line the service may answer (`("brief", "")`,
    `("hook", event)`, `("memory", command)`, `("knowledge", command)`), None for any other."""
    if any(a in ("-h", "--help", "--version", "-V") for a in args) or not args:
        return None
    head, rest = args[0], args[1:]
    if head == "brief":
        return head, ""
    if head == "hook":
        return (head, rest[0]) if rest and rest[0] in _HOOKS else None
    command = _subcommand(rest)
    if head == "memory" and command in _MEMORY:
        return head, command
    if head == "knowledge" and command in _KNOWLEDGE and _knowledge_routable(command, rest):
        return head, command
    return None


def _knowledge_routable(command: str, rest: list[str]) -> bool:
    """Whether the service may run this `knowledge` command (`rest`: its words after the
    group's name). Not one that may fetch a URL (the service keeps a page it fetched for 5
    minutes, `knowledge.service._FETCHED`, where a new process fetches it again), nor a
    `search --source FILE`, which may index the whole file first (as `index` does: minutes of
    CPU, no Ctrl-C to stop them in the service), nor `store KEY -`, which reads stdin."""
    values = [a.removeprefix("--source=") for a in rest]
    if any("://" in v and not v.lower().startswith("stored://") for v in values):
        return False
    if command == "store":
        return "-" not in rest
    if command != "search":
        return True
    named = [v for a, v in zip(rest, values, strict=True) if a.startswith("--source=")]
    named += [rest[i + 1] for i, a in enumerate(rest[:-1]) if a == "--source"]
    return rest[-1] != "--source" and all(v.lower().startswith("stored://") for v in named)


def _subcommand(rest: list[str]) -> str | None:
    """The subcommand after a group's options (--scope S / --global / --role R), None for
    anything else."""
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        if rest[i] in ("--scope", "--role"):
            i += 1
        elif not (rest[i].startswith(("--scope=", "--role=")) or rest[i] == "--global"):
            return None
        i += 1
    return rest[i] if i < len(rest) else None


def _embeds_at_once(args: list[str]) -> bool:
    """Whether this command line embeds a text or two as soon as it runs (`_EMBEDDING`), or
    a `knowledge search` of what is indexed, which embeds its query alone (one naming a
    `--source` may index it first: many texts, for the optimised session)."""
    if command_of(args) in _EMBEDDING:
        return True
    return (
        args[:1] == ["knowledge"]
        and _subcommand(args[1:]) == "search"
        and not any(a in ("-h", "--help") or a.startswith("--source") for a in args)
    )


def _hook_input(args: list[str], stdin: bytes | None) -> bytes | None:
    """A hook's JSON, read here if the service was not asked for it (None: not a hook, or its
    stdin is a terminal, read by the hook itself)."""
    if stdin is not None or args[:1] != ["hook"] or sys.stdin is None or sys.stdin.isatty():
        return stdin
    return sys.stdin.buffer.read(HOOK_INPUT_BYTES + 1)


def _names_a_transcript(stdin: bytes) -> bool:
    """Whether a hook's JSON names a transcript file that is there: a `hook session-end` or
    `pre-compact` without one embeds nothing, and loaded the bundled model ahead for nothing
    (75 MB and a share of the second core, in-process: the service off, or refused)."""
    from octobrain.json_values import read_json

    try:  # (read as the hook reads it: nested past the recursion limit too is unreadable)
        path = read_json(stdin).get("transcript_path")
    except (ValueError, AttributeError):  # (the hook says what is wrong with its input)
        return False
    return isinstance(path, str) and os.path.isfile(path)


def routable(args: list[str]) -> bool:
    """Whether the service may answer this command line (else it runs in-process)."""
    command = command_of(args)
    # forget asks for confirmation on a terminal: only the terminal's own process can.
    terminal = sys.stdin is not None and sys.stdin.isatty()
    return command is not None and not (command == ("memory", "forget") and terminal)


# git reads these to find the repository and its remote, so they decide a command's scope: the
# service runs git in its own environment, so a caller that sets one runs in-process (a git
# hook in a worktree sets GIT_DIR; see `service_client.service_environment`).
GIT_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_NAMESPACE", "GIT_CONFIG",
                "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
                "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_OBJECT_DIRECTORY",
                "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_INDEX_FILE")  # fmt: skip


def git_located() -> bool:
    """Whether this process's environment tells git where (or how) to find the repository."""
    return any(name in os.environ for name in GIT_LOCATING)


def mcp_routable(args: list[str]) -> bool:
    """Whether the service may host this `octobrain mcp` session (stdio, no options)."""
    return args == ["mcp"] and not os.environ.get("OCTOBRAIN_MCP_BIND", "").strip()


def main(args: list[str] | None = None, prog_name: str | None = None) -> NoReturn:
    """Run one `octobrain` command line: through the service when it can, else in-process.
    A Ctrl-C ends it as click ends a command it interrupts ("Aborted!", exit 1), also before
    click runs (while the service is asked, or the command's modules are imported, this one
    too: `octobrain._hold_interrupts`), where it printed the interpreter's traceback of
    wherever it landed."""
    try:
        if octobrain._release_interrupts():  # (pressed as this process imported the launcher)
            raise KeyboardInterrupt
        _main(args, prog_name)
    except KeyboardInterrupt:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write("\nAborted!\n")  # (as click writes it)
            sys.stderr.flush()
        exit_now(1)


def _main(args: list[str] | None, prog_name: str | None) -> NoReturn:
    argv = list(sys.argv[1:] if args is None else args)
    prog = prog_name or os.path.basename(sys.argv[0])
    escape_what_stdout_cannot_encode()  # (before the service is told how to write for us)
    stdin: bytes | None = None
    if git_located():
        pass  # the scope depends on this environment's git settings: run here
    elif mcp_routable(argv):
        settings = load_settings()
        if settings is not None and settings.enabled:
            with contextlib.suppress(Fallback):
                sys.exit(run_mcp(settings))
    elif routable(argv):
        settings = load_settings()
        if settings is not None and settings.enabled:
            if argv[0] == "hook":  # hooks read their JSON on stdin
                stdin = b"" if sys.stdin is None else sys.stdin.buffer.read(HOOK_INPUT_BYTES + 1)
            with contextlib.suppress(Fallback), _output_failure_as_a_line():
                repeatable = command_of(argv) in _REPEATABLE
                sys.exit(run_remote(settings, argv, prog, stdin, repeatable=repeatable))
    if _embeds_at_once(argv):
        stdin = _hook_input(argv, stdin)
        if stdin is None or _names_a_transcript(stdin):
            _load_model_ahead()
    if stdin is not None:
        import io

        encoding = sys.stdin.encoding if sys.stdin is not None else "utf-8"
        errors = sys.stdin.errors if sys.stdin is not None else "strict"
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding=encoding, errors=errors)
    from octobrain.cli.common import OwnProcess
    from octobrain.cli.library_log import install
    from octobrain.cli.main import main as cli_main

    if argv[:1] != ["mcp"]:  # (a server's stop is its own)
        _terminate_as_an_exit()
    install()
    OwnProcess.brains = []
    try:
        with _output_failure_as_a_line():
            cli_main(args=argv, prog_name=prog)
    except SystemExit as done:
        with contextlib.suppress(KeyboardInterrupt):  # (the command's answer stands)
            OwnProcess.finish()
        exit_now(done.code)
    except Exception:  # (click leaves a bug's traceback to the interpreter: printed the same)
        import traceback

        traceback.print_exc()
        exit_now(1)
    sys.exit(0)  # pragma: no cover - click's standalone mode always exits


# A write to standard output that fails for good (a full disk, /dev/full): not a bug of the
# command, whose own writes to the store say how they fail, wrapped. (A closed pipe, `| head`,
# is click's to end quietly; an I/O error is left a traceback: a disk's, not the output's.)
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


@contextlib.contextmanager
def _output_failure_as_a_line() -> Iterator[None]:
    """An answer that cannot be written ends the command with one line on stderr (exit 1),
    not a traceback."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise
        _say_output_failed(exc)
        exit_now(1)


_OUTPUT_FAILED: list[bool] = []  # (said once: the buffer left fails its flush at exit again)


def _say_output_failed(exc: OSError) -> None:
    if _OUTPUT_FAILED:
        return
    _OUTPUT_FAILED.append(True)
    with contextlib.suppress(OSError):
        sys.stderr.write(f"error: output: cannot be written ({exc.strerror or exc})\n")
        sys.stderr.flush()


_AHEAD = "octobrain-model-ahead"


def _load_model_ahead() -> None:
    """Start loading the bundled model (when the config names it) on a thread of its own,
    before this process imports what the command needs. onnxruntime builds its session
    without holding the interpreter, so the load goes on while the imports run; the command
    waits for this load rather than starting another (`embed.local.load_bundled`). The thread
    is a daemon: a command that ends before it is done (a refused input) does not wait for it,
    and it ends with `exit_now`, which tears nothing down under it. Anything that fails here is
    left for the command's own load to report."""
    # From here two threads import: a Ctrl-C must not land in the import system's own locking.
    # (Only in place of the interpreter's handler: an ignored SIGINT stays ignored.)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # (not the main thread: its host's business)
            signal.signal(signal.SIGINT, _interrupt_outside_imports)

    def load() -> None:
        try:
            from octobrain.config.loader import load_config, log
            from octobrain.modelspec import parse_model_spec

            log.addFilter(lambda record: record.threadName != _AHEAD)  # (the command warns)
            if parse_model_spec(load_config().embedding.model).bundled:
                from octobrain.embed.local import expect_few_texts, load_bundled

                expect_few_texts()  # (these commands embed a text or two, then exit)
                load_bundled()
        except Exception:  # (see above)
            return

    threading.Thread(target=load, name=_AHEAD, daemon=True).start()


def _interrupt_outside_imports(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C as the interpreter takes it (`KeyboardInterrupt`), except in the import system's
    own code, where it is sent again a moment later, until it lands outside. Raised between
    importlib taking its global lock and the `try` that gives it back (a callback run as a
    module's lock is freed), it left that lock held for good; the thread loading the model
    ahead, importing too, waited for it while holding the lock of a module this thread then
    waited for, and the process hung until a second Ctrl-C (2 of 8 Ctrl-Cs 0.15 s into
    `memory remember`)."""
    if _again_outside_imports(signum, frame, _interrupt_outside_imports):
        return
    signal.default_int_handler(signum, frame)


def _again_outside_imports(signum: int, frame: FrameType | None, handler: object) -> bool:
    """Whether the signal landed while a module is being imported (the import system's code
    anywhere on the stack: a module's own code run as it is imported, too) or in `handler`
    itself, and so is sent again 10 ms later rather than raised there
    (`_interrupt_outside_imports`). Raised inside a module's own code, it left that module half
    made for the threads importing beside this one ("module 'lancedb' has no attribute
    'connect'" from the startup sleep check), a class half made (a traceback from its
    `__set_name__`), or an event loop half made (its `__del__` complaining of `_ssock`): 3
    Ctrl-Cs of 80 sent 0.12–0.42 s into `memory remember`."""
    if frame is not None and frame.f_code is getattr(handler, "__code__", None):
        pass  # (sent again while this ran)
    elif not _importing(frame):
        return False
    again = threading.Timer(0.01, _interrupt_main, (signum,))
    again.daemon = True
    again.start()
    return True


def _terminate_as_an_exit() -> None:
    """Let SIGTERM (`kill`, `timeout`, a supervisor) end a command run in this process as a
    Ctrl-C does: by an exception, so that what the command holds is let go on the way out
    (an export's partial file removed, a lock released), then exit 143 (128 + SIGTERM), as a
    process the signal killed. It killed the process where it stood: `memory export FILE`
    left its partial file beside FILE. Only in place of the default: an ignored SIGTERM
    stays ignored."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        with contextlib.suppress(ValueError):  # (not the main thread: its host's business)
            signal.signal(signal.SIGTERM, _exit_outside_imports)


_TERMINATED: list[bool] = []  # (once: a second SIGTERM does not cut the way out short)


def _exit_outside_imports(signum: int, frame: FrameType | None) -> None:
    if _TERMINATED or _again_outside_imports(signum, frame, _exit_outside_imports):
        return
    _TERMINATED.append(True)
    raise SystemExit(128 + signum)


def _importing(frame: FrameType | None) -> bool:
    """Whether `frame`, or one it was called from, is the import system's."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


def _interrupt_main(signum: int) -> None:
    """Send `signum` to the main thread: a signal wakes it from a wait, as the first did."""
    main = threading.main_thread().ident
    if hasattr(signal, "pthread_kill") and main is not None:
        signal.pthread_kill(main, signum)
    else:
        _thread.interrupt_main(signal.Signals(signum))


def exit_now(code: object) -> NoReturn:
    """End this process as the interpreter would (its threads joined, `atexit` handlers run,
    stdout and stderr flushed), then skip tearing down its modules: freeing the objects a
    command leaves behind (the mirror, Arrow tables, LanceDB's runtime, the model) one by one
    cost a new process about 0.2 s of CPU after its answer was out (`hook session-start` on a
    10,000-memory store: 0.83 against 0.66 s of CPU, medians of 8 alternated runs), for memory
    the kernel takes back whole. Without the interpreter's hooks for this (private names), the
    process exits the usual way."""
    import atexit

    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None or sys.getprofile() or sys.gettrace():
        raise SystemExit(code)  # (a profiler or debugger writes its report on the way out)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as the interpreter does with sys.exit("message")
        sys.stderr.write(f"{code}\n")
        status = 1
    shutdown()  # waits for non-daemon threads (a snapshot being written, a model loading)
    run_exitfuncs()  # queued access counts committed (`memory.access`)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError as exc:
            if stream is sys.stdout and exc.errno in _OUTPUT_ERRNOS:  # (what was left buffered)
                _say_output_failed(exc)
                status = status or 1
            else:  # a closed pipe: the interpreter exits 120 then
                status = status or 120
        except ValueError:
            status = status or 120
    os._exit(status & 0xFF)
