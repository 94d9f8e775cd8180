"""Shared pieces of the command line: one-place error reporting and common options."""

from __future__ import annotations

from typing import IO, Any

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


FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
