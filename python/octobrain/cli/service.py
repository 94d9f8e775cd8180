"""`octobrain service status|start|stop`: see and control the resident service of this data dir."""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any

import click

from octobrain.cli.common import FORMAT_OPTION, OctobrainGroup, UserFailure
from octobrain.errors import InvalidInput

if TYPE_CHECKING:
    from octobrain.cli.service_client import Settings


@click.group("service", cls=OctobrainGroup)
def service() -> None:
    """The warm background process that answers memory commands and hooks (per data dir)."""


def _settings() -> Settings:
    from octobrain.cli.service_client import load_settings

    settings = load_settings()
    if settings is None:
        raise UserFailure(
            "service: unavailable here (no Unix sockets, an unreadable config file, or an "
            "unsafe runtime directory); commands run in-process"
        )
    return settings


def _switched_off_by() -> str:
    """What turned the service off: the environment variable if set, else the config key."""
    from octobrain.cli.service_client import ENABLED_VAR

    if ENABLED_VAR in os.environ:
        return f"{ENABLED_VAR}={os.environ[ENABLED_VAR]}"
    return "service.enabled = false"


def _stuck(settings: Settings) -> str | None:
    """When a service holds the lock yet gave no answer: what to say of it (None: no service
    holds it, or it answered)."""
    from octobrain.cli.service_client import lock_holder, service_alive

    if not service_alive(settings):
        return None
    pid = lock_holder(settings)
    who = f"the service (pid {pid})" if pid else "a service"
    ends = f"`kill {pid}` ends it" if pid else "its process must be ended"
    return f"{who} holds the lock but gave no answer (stopped, or stuck); {ends}"


@service.command("status")
@FORMAT_OPTION
def status_cmd(fmt: str) -> None:
    """Whether the service runs, and what it holds."""
    from octobrain.cli.service_client import ask

    settings = _settings()
    info = ask(settings, "status")
    stuck = _stuck(settings) if info is None else None
    data = {"running": info is not None, "enabled": settings.enabled, **(info or {})}
    data.setdefault("socket", str(settings.socket_path))
    if stuck is not None:
        data["stuck"] = stuck
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
        if stuck is not None:
            raise SystemExit(1)
        return
    state = "enabled" if settings.enabled else f"disabled ({_switched_off_by()})"
    if stuck is not None:
        raise UserFailure(f"service: {stuck}")
    if info is None:
        click.echo(f"not running ({state}); socket {settings.socket_path}")
        return
    click.echo(
        f"running: pid {info['pid']}, octobrain {info['version']}, {info['served']} commands "
        f"served, {info.get('mcp_sessions', 0)} MCP sessions open, idle "
        f"{info['idle_for']:.0f} s of {info['idle_seconds']:.0f} s, "
        f"{info['rss_mb']:.0f} MB resident, store {_load_state(info)}"
        f" ({state})\nsocket {info['socket']}"
    )


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
def start_cmd(wait: float) -> None:
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
    while time.monotonic() < deadline:
        info = ask(settings, "status")
        if info is None:
            # (a no-op while a service, perhaps one of another build, is exiting)
            spawn(settings, load_now=True)
        elif info.get("loaded"):
            click.echo(f"running: pid {info['pid']}, socket {info['socket']}")
            return
        time.sleep(0.1)
    raise UserFailure(f"service: did not answer within {wait:g} s (see {settings.log_path})")


@service.command("stop")
def stop_cmd() -> None:
    """Stop the service (the next command runs in-process and starts a new one)."""
    from octobrain.cli.service_client import ask, service_alive

    settings = _settings()
    info = ask(settings, "stop")
    if info is None:
        stuck = _stuck(settings)
        if stuck is not None:  # (it said "not running", and the process stayed)
            raise UserFailure(f"service: {stuck}")
        click.echo("not running")
        return
    deadline = time.monotonic() + 10.0
    while service_alive(settings) and time.monotonic() < deadline:
        time.sleep(0.05)
    click.echo(f"stopped pid {info['pid']}")
