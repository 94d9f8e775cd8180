"""`octobrain service status|start|stop`: see and control the resident service of this data dir."""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    OctobrainGroup,
    UserFailure,
    emit,
    emit_json,
    plural,
)
from octobrain.errors import InvalidInput

if TYPE_CHECKING:
    from octobrain.cli.service_settings import Settings


@click.group("service", cls=OctobrainGroup)
def service() -> None:
    """The warm background process that answers memory commands and hooks (per data dir)."""


def _settings() -> Settings:
    from octobrain.cli.service_settings import load_settings, why_unavailable

    settings = load_settings()
    if settings is None:
        raise UserFailure(f"service: unavailable: {why_unavailable()}; commands run in-process")
    return settings


def _switched_off_by() -> str:
    """What turned the service off: the environment variable if set, else the config key."""
    from octobrain.cli.service_settings import ENABLED_VAR

    if ENABLED_VAR in os.environ:
        return f"{ENABLED_VAR}={os.environ[ENABLED_VAR]}"
    return "service.enabled = false"


def _stuck(pid: int | None) -> str:
    """What to say of a service that holds the lock and listens yet gave no answer."""
    return f"{_who(pid)} holds the lock but gave no answer (stopped, or stuck); {_ends(pid)}"


def _who(pid: int | None) -> str:
    return f"the service (pid {pid})" if pid else "a service"


def _ends(pid: int | None) -> str:
    return f"`kill {pid}` ends it" if pid else "its process must be ended"


def _silent(settings: Settings) -> dict[str, Any]:
    """A service that holds the lock but gave no answer, as JSON: `{"stopping": true, "pid"}`
    (it exits, settling its stores: asked to stop, stepping aside for another build, or
    idle), `{"starting": true, "pid"}` (its socket not open yet), `{"stuck": what to say,
    "pid"}` (it listens); `{}` when no service holds the lock (`lock_state`)."""
    from octobrain.cli.service_client import lock_holder, lock_state

    state = lock_state(settings)
    if state is None:
        return {}
    pid = lock_holder(settings)
    return {"stuck": _stuck(pid), "pid": pid} if state == "listening" else {state: True, "pid": pid}


def _silent_said(row: dict[str, Any]) -> str:
    """`_silent`'s answer said: "stopping", "starting" or what makes it stuck."""
    return str(row.get("stuck") or ("stopping" if row.get("stopping") else "starting"))


# How long `service stop` waits for the services it asked to let go of their locks.
STOP_SECONDS = 10.0

_ALL_OPTION = click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every service of yours (each data dir, config file and environment has its own).",
)


@service.command("status")
@_ALL_OPTION
@FORMAT_OPTION
def status_cmd(every: bool, fmt: str) -> None:
    """Whether the service runs, and what it holds."""
    from octobrain.cli.service_client import ask

    settings = _settings()
    if every:
        _status_all(settings, fmt)
        return
    info = ask(settings, "status")
    # Before: one stopping (or starting) was "not running" (it holds its lock and memory).
    silent = _silent(settings) if info is None else {}
    data = {"running": info is not None, "enabled": settings.enabled, **(info or silent)}
    data.setdefault("socket", str(settings.socket_path))
    others = _other_environments(settings) if info is None and not silent else []
    if others:
        data["other_environments"] = [_elsewhere(row) for row in others]
    if fmt == "json":
        emit_json(data)
        if "stuck" in silent:
            raise SystemExit(1)
        return
    state = "enabled" if settings.enabled else f"disabled ({_switched_off_by()})"
    if "stuck" in silent:
        raise UserFailure(f"service: {silent['stuck']}")
    if silent:
        said = _silent_said(silent)
        click.echo(f"{said}: pid {silent['pid'] or '?'} ({state}); socket {settings.socket_path}")
        return
    if info is None:
        elsewhere = _elsewhere_said(others, "status")
        here = " in this environment" if elsewhere else ""
        click.echo(f"not running{here} ({state}); socket {settings.socket_path}")
        if elsewhere:
            click.echo(elsewhere)
        return
    click.echo(
        f"running: pid {info['pid']}, octobrain {info['version']}, "
        f"{plural(info['served'], 'command', 'commands')} served, "
        f"{plural(info.get('mcp_sessions', 0), 'MCP session', 'MCP sessions')} open, idle "
        f"{info['idle_for']:.0f} s of {info['idle_seconds']:.0f} s, "
        f"{info['rss_mb']:.0f} MB resident, store {_load_state(info)}"
        f" ({state}){_stale(info)}\nsocket {info['socket']}"
    )


def _stale(info: dict[str, Any], *, this: bool = True) -> str:
    """What makes a running service give way at the next command ("" for nothing). (Another
    environment's may be another install's, of its own build.)"""
    from octobrain.cli.service_client import build_id

    if this and info.get("build") not in (None, build_id()):
        return "; of another build of octobrain: the next command replaces it"
    if info.get("stale"):
        return f"; {info['stale']}: the next command replaces it"
    return ""


def _every(settings: Settings) -> list[tuple[Settings, int | None]]:
    """The services of this user in this runtime directory that hold their lock (alive, or
    stuck), with the pid each wrote: one per data dir, config file and environment."""
    from octobrain.cli.service_client import lock_holder, service_alive
    from octobrain.cli.service_settings import Settings

    found = []
    for name in sorted(os.listdir(settings.runtime_dir)):
        if not name.endswith(".lock"):
            continue
        other = Settings(
            settings.enabled, settings.idle_seconds, settings.wait_seconds, name[:-5],
            settings.runtime_dir, settings.config_file,
        )  # fmt: skip
        if service_alive(other):
            found.append((other, lock_holder(other)))
    return found


def _status_all(settings: Settings, fmt: str) -> None:
    """`service status --all`: one line (a JSON object) per service of this user."""
    from octobrain.cli.service_client import ask

    rows: list[dict[str, Any]] = []
    for other, pid in _every(settings):
        info = ask(other, "status")
        if info is None:  # (gone since it was listed: it was stopping)
            rows.append({"running": False, "pid": pid, **(_silent(other) or {"stopping": True})})
        else:
            rows.append({"running": True, **info, "this": other.key == settings.key})
    if fmt == "json":
        emit_json(rows)
        return
    if not rows:
        click.echo(f"no service running (in {settings.runtime_dir})")
    for row in rows:
        if not row["running"]:
            click.echo(f"pid {row['pid'] or '?'}: {_silent_said(row)}")
            continue
        click.echo(
            f"pid {row['pid']}, octobrain {row['version']}, {row['rss_mb']:.0f} MB resident, "
            f"idle {row['idle_for']:.0f} s of {row['idle_seconds']:.0f} s, "
            f"{plural(row['served'], 'command', 'commands')} served: data "
            f"{row.get('data_dir', '?')}, config "
            f"{row['config']}" + (" (this one)" if row["this"] else _differs(row))
            + _stale(row, this=row["this"])
        )  # fmt: skip


def _other_environments(settings: Settings) -> list[dict[str, Any]]:
    """The status of each service of this data dir and config file that runs under another
    environment (started from a shell with other AWS_* or OCTOBRAIN_* variables): one per
    environment, so this one's says "not running" while it runs."""
    from octobrain.cli.service_client import ask
    from octobrain.cli.service_settings import data_dir

    found = []
    for other, _pid in _every(settings):
        info = ask(other, "status") if other.key != settings.key else None
        if info and (info.get("data_dir"), info.get("config")) == (
            data_dir(),
            str(settings.config_file),
        ):
            found.append(info)
    return found


def _elsewhere(row: dict[str, Any]) -> dict[str, Any]:
    """A service `_other_environments` found, as JSON: its pid and what differs."""
    return {"pid": row["pid"], "environment": _differing(row)}


def _pid_differing(row: dict[str, Any]) -> str:
    """A service `_other_environments` found, said: its pid and what differs."""
    said = _differing(row)
    return f"pid {row['pid']}" + (f": {', '.join(said)}" if said else "")


def _elsewhere_said(rows: list[dict[str, Any]], command: str) -> str:
    """The line naming the services `_other_environments` found ("" for none)."""
    if not rows:
        return ""
    each = "; ".join(_pid_differing(row) for row in rows)
    one = len(rows) == 1
    does = {"status": "lists", "stop": "stops"}[command]
    return (
        f"{'a service' if one else 'services'} of this data directory and config file "
        f"{'runs' if one else 'run'} under another environment ({each}): `octobrain service "
        f"{command} --all` {does} {'it' if one else 'them'}"
    )


def _differs(row: dict[str, Any]) -> str:
    """Which of the variables that make a service of their own differ from this process's."""
    said = _differing(row)
    return f"; environment: {', '.join(said)}" if said else ""


def _differing(row: dict[str, Any]) -> list[str]:
    """The variables that make a service of their own and differ from this process's ones
    (names only: their values may be credentials)."""
    from octobrain.cli.service_settings import environment_marks

    theirs = row.get("environment")
    if not isinstance(theirs, dict):
        return []  # (an older service: it does not say)
    ours = environment_marks()
    said = []
    for name in sorted(set(ours) | set(theirs)):
        if name not in theirs:
            said.append(f"{name} set only here")
        elif name not in ours:
            said.append(f"{name} not set here")
        elif ours[name] != theirs[name]:
            said.append(f"{name} set otherwise")
    return said


def _load_state(info: dict[str, Any]) -> str:
    if info["loaded"]:
        return "loaded"
    if info.get("waiting"):
        return "not loaded yet (it loads when the command that started it ends, or on a request)"
    return "loading"


@service.command("start")
@click.option(
    "--wait",
    "wait",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for it to answer.",
)
@FORMAT_OPTION
def start_cmd(wait: float, fmt: str) -> None:
    """Start the service now (commands otherwise start it on demand) and wait until it answers."""
    from octobrain.cli.service_client import ask, spawn

    if math.isnan(wait):  # (passes FloatRange: every comparison with NaN is false)
        raise InvalidInput("wait", "nan is not a number of seconds in [0, 3600]")
    settings = _settings()
    if not settings.enabled:
        raise UserFailure(
            f"service: disabled ({_switched_off_by()}); every command runs in-process"
        )
    deadline = time.monotonic() + wait
    replacing = False
    while time.monotonic() < deadline:
        info = ask(settings, "status")
        if info is not None and _stale(info):
            # Of another build (an upgrade) or config: it was said to be running, and stayed.
            if not replacing:
                replacing = True
                ask(settings, "stop")  # (refused: it steps aside for this build)
                spawn(settings, load_now=True, successor=True)
        elif info is None:
            # (a no-op while a service, perhaps one of another build, is exiting)
            spawn(settings, load_now=True)
        elif info.get("loaded"):
            said = {"pid": info["pid"], "socket": info["socket"]}
            emit(fmt, said, f"running: pid {info['pid']}, socket {info['socket']}")
            return
        time.sleep(0.1)
    raise UserFailure(f"service: did not answer within {wait:g} s (see {settings.log_path})")


@service.command("stop")
@_ALL_OPTION
@FORMAT_OPTION
def stop_cmd(every: bool, fmt: str) -> None:
    """Stop the service (the next command runs in-process and starts a new one)."""
    from octobrain.cli.service_client import mark_stopped

    settings = _settings()
    if every:
        _stop_all(settings, fmt)
        return
    mark_stopped(settings)  # (a successor waiting for it does not take over)
    deadline = time.monotonic() + STOP_SECONDS
    info = _asked_to_stop(settings, deadline)
    if info is None:
        stuck = _unanswered(settings)
        if stuck is not None:  # (it said "not running", and the process stayed)
            raise UserFailure(f"service: {stuck}")
        others = _other_environments(settings)
        said = "not running" + (
            f" in this environment; {_elsewhere_said(others, 'stop')}" if others else ""
        )
        data: dict[str, Any] = {"stopped": []}
        if others:
            data["other_environments"] = [_elsewhere(row) for row in others]
        emit(fmt, data, said)
        return
    _see_stopped([(settings, info.get("pid"), info)], fmt, deadline)


def _asked_to_stop(settings: Settings, deadline: float) -> dict[str, Any] | None:
    """The service's answer to `stop` (None: none holds the lock, or one gave no answer). One
    stopping already (a second `stop` at once, a step-aside, an idle exit) is said stopping: it
    was "the service (pid N) holds the lock but gave no answer (stopped, or stuck)", exit 1.
    One starting (a successor that has just taken over from one that stepped aside, its socket
    not open yet) is asked once it listens, until `deadline`: it was said stopping and served
    on, and `stop` called it stuck after its wait."""
    from octobrain.cli.service_client import ask, lock_holder, lock_state

    state = lock_state(settings)
    while state == "starting" and time.monotonic() < deadline:
        time.sleep(0.05)
        state = lock_state(settings)
    if state in (None, "listening"):
        info = ask(settings, "stop")
        if info is not None:
            return info
        state = lock_state(settings)  # (it may have begun to stop meanwhile)
    return {"stopping": True, "pid": lock_holder(settings)} if state == "stopping" else None


def _unanswered(settings: Settings) -> str | None:
    """What to say of a service that holds the lock and gave `stop` no answer (None: none
    holds it, or it is stopping)."""
    from octobrain.cli.service_client import lock_holder, lock_state

    state = lock_state(settings)
    pid = lock_holder(settings)
    if state == "starting":
        return (
            f"{_who(pid)} took the lock but has not opened its socket within "
            f"{STOP_SECONDS:g} s (stopped, or stuck); {_ends(pid)}"
        )
    return _stuck(pid) if state == "listening" else None


def _stop_all(settings: Settings, fmt: str) -> None:
    """`service stop --all`: stop every service of this user (any build: one of another build
    asked to stop stops too); a stuck one is named, and the exit is 1."""
    from octobrain.cli.service_client import mark_stopped

    found = _every(settings)
    for other, _pid in found:
        mark_stopped(other)  # (a successor waiting for it does not take over)
    if not found:
        emit(fmt, {"stopped": []}, "not running")
        return
    deadline = time.monotonic() + STOP_SECONDS
    asked = [(other, pid, _asked_to_stop(other, deadline)) for other, pid in found]
    _see_stopped(asked, fmt, deadline)


def _see_stopped(
    asked: list[tuple[Settings, Any, dict[str, Any] | None]],
    fmt: str,
    deadline: float | None = None,
) -> None:
    """Wait (until `deadline`, `STOP_SECONDS` from now by default) for each service asked to
    stop to let go of its lock: each
    gone is said stopped; one still there is named, and the exit is 1 (before, `stop` said
    "stopped" after its wait whether or not the service had gone)."""
    from octobrain.cli.service_client import gone_by

    deadline = time.monotonic() + STOP_SECONDS if deadline is None else deadline
    stopped, stuck = [], []
    for other, pid, info in asked:
        pid = (info or {}).get("pid", pid)
        if gone_by(other, deadline, pid if isinstance(pid, int) else None):
            stopped.append(pid)
            if fmt == "text":  # (said as each goes; JSON once all are known)
                click.echo(f"stopped pid {pid}")
        elif info is None:  # (it gave no answer to the stop)
            stuck.append(_unanswered(other) or f"the service (pid {pid}) did not stop")
        else:
            stuck.append(
                f"the service (pid {pid}) said it stops but still holds its lock after "
                f"{STOP_SECONDS:g} s; `kill {pid}` ends it"
            )
    if stuck:
        raise UserFailure("service: " + "; ".join(stuck))
    if fmt == "json":
        emit(fmt, {"stopped": stopped}, "")
