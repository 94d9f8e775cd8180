"""The `octobrain` command line (click). Thin: parse, call the library, format.

Imports of anything heavy stay inside the commands, so `octobrain --help` is instant. Errors the
user can fix are reported in one place (`OctobrainGroup.invoke`): one line on stderr,
`error: <field>: <rule>`, exit code 2 for bad input (1 for other failures), no traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

import click

from octobrain import __version__
from octobrain.errors import InvalidInput, OctobrainError

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


class UserError(click.ClickException):
    """A failure reported as one line on stderr, without a traceback."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        """Print `error: <message>` to stderr."""
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class UserFailure(UserError):
    """A failure that is not bad input (a model that cannot load, a service that is down)."""

    exit_code = EXIT_FAILURE


class OctobrainGroup(click.Group):
    """A click group that turns octobrain's domain errors into `UserError`s.

    Subgroups inherit it (`group_class = type`), and the root's `invoke` wraps every subcommand,
    so later commands get the same error handling for free.
    """

    group_class = type

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; map `InvalidInput` to exit 2, other `OctobrainError`s to exit 1."""
        try:
            return super().invoke(ctx)
        except InvalidInput as exc:
            raise UserError(str(exc)) from exc
        except OctobrainError as exc:
            raise UserFailure(str(exc)) from exc


FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)


@click.group(cls=OctobrainGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="octobrain")
def main() -> None:
    """octobrain: long-term memory for AI agents, served over MCP."""


@main.group("config")
def config_group() -> None:
    """Show, locate or create the configuration file."""


@config_group.command("show")
@FORMAT_OPTION
def config_show(fmt: str) -> None:
    """Print the effective configuration (file + OCTOBRAIN_* env overrides)."""
    from octobrain.config import config_path, load_config, render_toml

    path = config_path()
    config = load_config(path)
    if fmt == "json":
        payload = {"path": str(path), "exists": path.exists(), "config": config.to_dict()}
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    state = "" if path.exists() else " (missing: defaults apply)"
    overrides = sorted(k for k in os.environ if k.startswith("OCTOBRAIN_"))
    click.echo(f"# file: {path}{state}")
    if overrides:
        click.echo(f"# environment: {', '.join(overrides)}")
    click.echo(render_toml(config), nl=False)


@config_group.command("path")
def config_path_cmd() -> None:
    """Print where the configuration file is (it may not exist yet)."""
    from octobrain.config import config_path

    click.echo(str(config_path()))


@config_group.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def config_init(force: bool) -> None:
    """Write a commented template with every key at its default."""
    from octobrain.config import config_path, default_config_toml

    path = config_path()
    if path.exists() and not force:
        raise InvalidInput("config", f"{path} already exists; pass --force to overwrite it")
    _write_atomic(path, default_config_toml())
    click.echo(f"wrote {path}")


def _write_atomic(path: Path, text: str) -> None:
    """Write a file so that a reader never sees it half written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise InvalidInput("config", f"cannot write {path}: {exc.strerror or exc}") from exc
