"""Shared pieces of the command line: one-place error reporting and common options."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from octobrain.errors import InvalidInput, OctobrainError

if TYPE_CHECKING:
    from octobrain.brain import Brain

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


BrainFactory = Callable[[str, Path, str], "Brain"]
_brain_factory: BrainFactory | None = None


def open_brain(scope: str, workdir: Path, session_id: str = "") -> Brain:
    """The Brain a command works with: a new one, or the resident service's warm one."""
    if _brain_factory is not None:
        return _brain_factory(scope, workdir, session_id)
    from octobrain.brain import Brain

    return Brain(scope, workdir=workdir, session_id=session_id)


def use_brain_factory(factory: BrainFactory | None) -> None:
    """Make `open_brain` hand out Brains from `factory` (the resident service's pool)."""
    global _brain_factory
    _brain_factory = factory
