"""The `octobrain` command line (click). Thin: parse, call the library, format.

Imports of anything heavy stay inside the commands, so `octobrain --help` is instant. Errors the
user can fix are reported in one place (`OctobrainGroup.invoke`): one line on stderr,
`error: <field>: <rule>`, exit code 2 for bad input (1 for other failures), no traceback.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    OctobrainGroup,
    emit,
    emit_json,
    write_atomic_file,
)
from octobrain.errors import InvalidInput

# What a script relies on, where `--help` shows it (`common.EXIT_BAD_INPUT`, `EXIT_FAILURE`).
_EPILOG = """\b
Output: a command that prints data takes --format text|json; its answer
alone goes to stdout, progress lines and errors to stderr.
\b
Exit codes, the same for every command:
  0    done (`doctor`: nothing is wrong), or a question answered "no"
       at a terminal (`forget`, `restore`, `hook install`): nothing changed
  1    a failure that is not the command line's: a damaged store (or
       `doctor` found a problem), a model or the service that cannot
       answer, a URL's server (or name server) that cannot be reached
       or fails (refused, timed out, TLS, HTTP 5xx or 429, a redirect
       loop), an answer or output file that cannot be written (a full
       disk), Ctrl-C (Aborted!)
  2    bad input, as `error: <field>: <rule>` on stderr: a usage mistake,
       a value that breaks a rule (a malformed URL, a private address),
       an id, file or note not found, a URL's host or page not there
       (no such host, HTTP 404, 403, 410)
  143  ended by SIGTERM (its partial files removed)
Hooks (`hook session-start|pre-compact|session-end`) fail open: exit 0."""


def _show_version(ctx: click.Context, _param: click.Parameter, asked: bool) -> None:
    """`--version`, as click's `version_option` prints it; the version is looked up only then
    (reading the installed distribution's metadata cost every command 40 ms of CPU)."""
    if not asked or ctx.resilient_parsing:
        return
    from octobrain import __version__

    click.echo(f"octobrain, version {__version__}", color=ctx.color)
    ctx.exit()


@click.group(
    cls=OctobrainGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=_EPILOG
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
def main() -> None:
    """octobrain: long-term memory for AI agents, served over MCP."""


@main.group("config")
def config_group() -> None:
    """Show, locate or create the configuration file."""


@config_group.command("show")
@FORMAT_OPTION
def config_show(fmt: str) -> None:
    """Print the effective configuration (file + OCTOBRAIN_* env overrides)."""
    import dataclasses

    from octobrain.config import config_path, file_said, ignored_env, load_config, render_toml

    path = config_path()
    config = load_config(path)
    # Shown on screens and pasted into issues: secrets are said to be set, not what they are.
    if config.mcp.token:
        hidden = _as_set(config.mcp.token)
        config = dataclasses.replace(config, mcp=dataclasses.replace(config.mcp, token=hidden))
    options = tuple(_hide_secret(option) for option in config.storage.options)
    config = dataclasses.replace(
        config, storage=dataclasses.replace(config.storage, options=options)
    )
    ignored = ignored_env(os.environ)
    if fmt == "json":
        payload = {"path": str(path), "exists": path.exists(), "config": config.to_dict()}
        emit_json({**payload, "ignored_environment": ignored})
        return
    state = file_said(path)
    overrides = sorted(k for k in os.environ if k.startswith("OCTOBRAIN_") and k not in ignored)
    click.echo(f"# file: {path}{state}")
    if overrides:
        click.echo(f"# environment: {', '.join(overrides)}")
    if ignored:
        click.echo(f"# ignored, not a setting (misspelt?): {', '.join(ignored)}")
    click.echo(render_toml(config), nl=False)


# Storage option keys that hold a credential (`aws_secret_access_key`, `azure_storage_sas_key`,
# `google_service_account_key`, a session token, …).
_SECRET_OPTION = re.compile(r"secret|token|password|sas|(?:^|_)key$|credential", re.I)


def _as_set(secret: str) -> str:
    """What `config show` prints for a secret: that it is set, not what it is."""
    return f"<set: {len(secret)} characters>"


def _hide_secret(option: str) -> str:
    key, sep, value = option.partition("=")
    return f"{key}={_as_set(value)}" if sep and _SECRET_OPTION.search(key.strip()) else option


@config_group.command("path")
@FORMAT_OPTION
def config_path_cmd(fmt: str) -> None:
    """Print where the configuration file is (it may not exist yet)."""
    from octobrain.config import config_path

    path = config_path()
    emit(fmt, {"path": str(path), "exists": path.exists()}, str(path))


@config_group.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@FORMAT_OPTION
def config_init(force: bool, fmt: str) -> None:
    """Write a commented template with every key at its default."""
    from octobrain.config import config_path, default_config_toml

    path = config_path()
    if path.exists() and not force:
        raise InvalidInput("config", f"{path} already exists; pass --force to overwrite it")
    _write_atomic(path, default_config_toml())
    emit(fmt, {"wrote": str(path)}, f"wrote {path}")


def _write_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader never sees it half written."""
    write_atomic_file(path, text, "config")


def _register() -> None:
    # Command groups live in their own modules; importing them is cheap (no heavy imports).
    from octobrain.cli.bench import bench
    from octobrain.cli.brief import brief, hook
    from octobrain.cli.doctor import doctor_cmd
    from octobrain.cli.knowledge import knowledge
    from octobrain.cli.memory import memory
    from octobrain.cli.serve import mcp_cmd
    from octobrain.cli.service import service

    main.add_command(memory)
    main.add_command(knowledge)
    main.add_command(mcp_cmd)
    main.add_command(bench)
    main.add_command(brief)
    main.add_command(hook)
    main.add_command(service)
    main.add_command(doctor_cmd)


_register()
