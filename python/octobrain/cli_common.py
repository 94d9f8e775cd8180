"""Shared pieces of the command line: one-place error reporting and common options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click

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
        except (RuntimeError, OSError) as exc:
            from octobrain.store.manifest import read_failure

            line = read_failure(exc)
            if line is None:
                raise
            raise UserFailure(_damage_detail(line)) from exc


def _damage_detail(line: str) -> str:
    """`line`, with the damaged table and fragment named when `doctor` can find them."""
    try:
        from octobrain.config import load_config, resolve_storage_uri
        from octobrain.store.doctor import diagnose
        from octobrain.store.location import StoreLocation

        config = load_config()
        report = diagnose(StoreLocation.from_config(config, resolve_storage_uri(config)))
    except Exception:  # the generic line already says to run `octobrain doctor`
        return line
    if report.problems:
        return f"store {report.store}: {report.problems[0].line()} (see `octobrain doctor`)"
    return line


FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)


F = TypeVar("F", bound=Callable[..., Any])


def scope_options(fn: F) -> F:
    """`--scope S` / `--global` on a command group; the choice lands in `ctx.obj`."""
    fn = click.option("--global", "global_", is_flag=True, help="Use the global scope instead.")(fn)
    return click.option(
        "--scope", help="Project scope (default: derived from the cwd's git remote)."
    )(fn)


def chosen_scope(scope: str | None, global_: bool, cwd: Path | None = None) -> str:
    """The scope a command works in: `--global`, else `--scope`, else derived from the cwd."""
    if scope is not None and global_:
        raise InvalidInput("--global", "cannot be combined with --scope")
    if global_:
        return ""
    if scope is not None:
        return scope
    from octobrain.scope import derive_scope

    return derive_scope(cwd or Path.cwd())
