"""One command handed to the resident service (`service_client` has the exchange): the caller's
arguments, stdin, terminal width and stream encodings go over; the command's stdout, stderr and
exit code come back byte for byte. Standard library only, as `service_client`."""

from __future__ import annotations

import binascii
import contextlib
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from octobrain.cli.service_client import (
    ALIVE_SECONDS,
    PROTOCOL,
    RESULT_SECONDS,
    Channel,
    build_id,
    connect,
    connect_starting,
    receive_hello,
    spawn_at_exit,
)
from octobrain.cli.service_settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType
    from typing import Any


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _columns() -> int:
    """`shutil.get_terminal_size().columns`, without importing shutil (and its compressors)."""
    with contextlib.suppress(ValueError):
        columns = int(os.environ.get("COLUMNS", "0"))
        if columns > 0:
            return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def _encodings() -> dict[str, str]:
    """The caller's stream encodings, so the service encodes output as this process would."""
    out: dict[str, str] = {}
    for tag, stream in (("in", sys.stdin), ("out", sys.stdout), ("err", sys.stderr)):
        if stream is not None:
            out[f"{tag}_enc"] = stream.encoding
            out[f"{tag}_errors"] = stream.errors or "strict"
    return out


class Fallback(Exception):
    """The service cannot answer this command; run it in this process."""


def handed_over(channel: Channel, settings: Settings, successor: Callable[[], object]) -> None:
    """Read the service's hello; raise `Fallback` unless it took the request and is of this
    build. A service that refused steps aside (another build: an upgrade; a changed config):
    `successor` starts this build's, which takes over once it has gone."""
    hello = receive_hello(channel, settings)
    if hello is not None and hello.get("accepted") is False:
        successor()
    if hello is None or not hello.get("accepted") or hello.get("build") != build_id():
        raise Fallback


def run_remote(
    settings: Settings, args: list[str], prog: str, stdin: bytes | None, *, repeatable: bool = False
) -> int:
    """Run the command in the service; its exit code. Raises `Fallback` when it did not run,
    and when a `repeatable` command (one that may run twice) lost the service that ran it."""
    channel = connect(settings) or connect_starting(settings)
    if channel is None:
        spawn_at_exit(settings)
        raise Fallback
    try:
        channel.send(
            {
                "op": "run",
                "protocol": PROTOCOL,
                "build": build_id(),
                "argv": args,
                "prog": prog,
                "cwd": os.getcwd(),
                "stdin": None if stdin is None else _b64(stdin),
                "columns": _columns(),
                **_encodings(),
            }
        )
        # Refused, this command runs here, and a service of this build takes over as it ends.
        handed_over(channel, settings, lambda: spawn_at_exit(settings, successor=True))
        if channel.recv(settings.wait_seconds) != {"ready": True}:
            raise Fallback
    except (OSError, ValueError) as exc:  # TimeoutError is an OSError: a wedged service
        channel.sock.close()
        raise Fallback from exc
    except Fallback:
        channel.sock.close()
        raise
    with _interrupt_waits() as answered:  # (before `go`: from then on the command may be run)
        return _run_started(settings, channel, args, repeatable, answered)


def _run_started(
    settings: Settings,
    channel: Channel,
    args: list[str],
    repeatable: bool,
    answered: Callable[[], None],
) -> int:
    """Say `go` and wait for the command's answer: from then on the command may run there,
    so it is never run here too. Once the answer is in, `answered()`."""
    result: dict[str, Any] | None = None
    silent = False
    try:
        try:
            channel.send({"go": True})
        except OSError as exc:
            raise Fallback from exc  # (not said: nothing runs there)
        started = channel.recv(ALIVE_SECONDS)
        if started != {"running": True}:
            if started is None:
                raise Fallback  # the service closed without starting the command
            raise ValueError(started)
        deadline = time.monotonic() + RESULT_SECONDS
        while time.monotonic() < deadline:
            result = channel.recv(ALIVE_SECONDS)
            if result != {"alive": True}:
                break
        else:
            result = None
    except Fallback:
        channel.sock.close()
        raise
    except KeyboardInterrupt:  # the second Ctrl-C: the user leaves the command to the service
        channel.sock.close()
        sys.stderr.write(
            "\nerror: service: stopped waiting; the octobrain service goes on with the command "
            "and its effect is unknown (check with `octobrain memory recent`)\n"
        )
        return 1
    except TimeoutError:
        silent = True
    except (OSError, ValueError):
        result = None
    finally:
        channel.sock.close()
    if result is None and repeatable and not silent:
        # It stopped (its socket closed), so it holds no lock and prints nothing more: the
        # command runs here, and a service comes back as this process exits.
        sys.stderr.write("octobrain: the service stopped during the command; running it here\n")
        spawn_at_exit(settings)
        raise Fallback
    if result is None or "exit" not in result:
        what = (
            f"gave no sign of life for {ALIVE_SECONDS:g} s during the command (stopped or stuck)"
            if silent
            else "stopped during the command"
        )
        sys.stderr.write(
            f"error: service: the octobrain service {what}; its effect is unknown (check with "
            "`octobrain memory recent`)\n"
        )
        return 0 if args[:1] == ["hook"] else 1  # a hook fails open, as it does in-process
    answered()
    sys.stdout.flush()
    sys.stdout.buffer.write(binascii.a2b_base64(result["stdout"]))
    sys.stdout.flush()
    sys.stderr.buffer.write(binascii.a2b_base64(result["stderr"]))
    sys.stderr.flush()
    return int(result["exit"])


_WAITING = (
    "\noctobrain: the service is running this command and cannot stop it midway; waiting for "
    "its answer (Ctrl-C again to stop waiting)\n"
)


@contextlib.contextmanager
def _interrupt_waits() -> Iterator[Callable[[], None]]:
    """While the service runs the command, a first Ctrl-C says so and waits for the answer, a
    second one stops waiting (`KeyboardInterrupt`). The command goes on there either way:
    taking the first for "Aborted!" left a memory stored after the user was told it was not.
    The function it gives is called once the answer is in: the command is done, and a Ctrl-C
    from then on is ignored (pressed as the answer was written out it said "waiting", or
    "Aborted!", exit 1, with the answer cut; as the process exited, it killed it: exit 130).
    (Only in place of the interpreter's own handler: an ignored SIGINT stays ignored.)"""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield lambda: None
        return
    told: list[bool] = []

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if told:
            raise KeyboardInterrupt
        told.append(True)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(_WAITING)
            sys.stderr.flush()

    def answered() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        signal.signal(signal.SIGINT, interrupted)
    except ValueError:  # (not the main thread: its host's business)
        yield lambda: None
        return
    try:
        yield answered
    finally:
        if signal.getsignal(signal.SIGINT) is interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
