"""Shared pieces of the command line: one-place error reporting and common options."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from octobrain.errors import InvalidInput, OctobrainError, as_json, json_printable
from octobrain.files import write_atomic_file as write_atomic_file
from octobrain.safe_text import check_label, on_terminal, one_line, printable

if TYPE_CHECKING:
    from octobrain.knowledge import Knowledge
    from octobrain.memory.brain import Brain

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_FAILURE = 1


class UserError(click.ClickException):
    """A failure reported as one line on stderr, without a traceback."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[Any] | None = None) -> None:
        """Print `error: <message>` to stderr: one line, with nothing a terminal acts on (a
        path or value quoted in it may hold a line break, CR or ESC)."""
        click.echo(f"error: {one_line(printable(self.format_message()))}", err=True, file=file)


class UserFailure(UserError):
    """A failure that is not bad input (a model that cannot load, a service that is down)."""

    exit_code = EXIT_FAILURE


class OctobrainGroup(click.Group):
    """A click group that turns octobrain's domain errors into `UserError`s.

    Subgroups inherit it (`group_class = type`), and the root's `invoke` wraps every subcommand,
    so later commands get the same error handling for free.
    """

    group_class = type

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The group's own options, with click's complaints as one line (`usage_line`)."""
        with _usage_as_one_line():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; map `InvalidInput` to exit 2, other `OctobrainError`s to exit 1."""
        with _usage_as_one_line():  # a subcommand's command line, as parsed by click
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # (click's own, `--help` too: not the store's, so no need to import it)
        except InvalidInput as exc:
            if not exc.input_fault:  # (a URL whose server does not answer: not a mistake)
                raise UserFailure(str(exc)) from exc
            raise UserError(str(exc)) from exc
        except OctobrainError as exc:
            from octobrain.store.failures import TableUnreadable

            if isinstance(exc, TableUnreadable):  # (a Brain's read of LanceDB: as below)
                raise UserFailure(_damage_detail(str(exc))) from exc
            raise UserFailure(str(exc)) from exc
        except Exception as exc:  # ValueError: a file not Lance's; a panic: a damaged index
            from octobrain.store.failures import unreadable_line

            if isinstance(exc, FileNotFoundError) and not _cwd_exists():
                raise UserError(
                    "cwd: the current directory no longer exists; run from one that does"
                ) from None
            line = unreadable_line(exc)
            if line is None:
                raise
            raise UserFailure(_damage_detail(line)) from exc


@contextmanager
def _usage_as_one_line() -> Iterator[None]:
    """Click's complaints about a command line as one `UserError` line; a group named alone
    still shows its help."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise
    except click.UsageError as exc:
        raise UserError(usage_line(exc)) from exc


def usage_line(exc: click.UsageError) -> str:
    """Click's complaint about a command line as octobrain's one line: the field, the rule,
    where the help is (`title: is required (-t / --title); see 'octobrain memory memorize
    --help'`)."""
    hint = f"; see '{exc.ctx.command_path} --help'" if exc.ctx is not None else ""
    param = getattr(exc, "param", None)
    if isinstance(exc, click.MissingParameter) and param is not None:
        option = isinstance(param, click.Option)
        spelled = " / ".join(param.opts) if option else param.human_readable_name
        return f"{_field(param)}: is required ({spelled}){hint}"
    if isinstance(exc, click.BadParameter) and param is not None:
        return f"{_field(param)}: {exc.message.rstrip('.')}{hint}"
    if isinstance(exc, click.BadParameter) and exc.param_hint:  # raised by a command's body
        named = exc.param_hint if isinstance(exc.param_hint, str) else exc.param_hint[0]
        return f"{named}: {exc.message.rstrip('.')}{hint}"
    if isinstance(exc, click.NoSuchOption):
        close = f" (did you mean {' or '.join(exc.possibilities)}?)" if exc.possibilities else ""
        return f"{exc.option_name}: no such option{close}{hint}"
    message = exc.format_message().rstrip(".")
    if isinstance(exc, click.BadOptionUsage):  # "Option '-t' requires an argument"
        said = message.removeprefix(f"Option {exc.option_name!r} ")
        return f"{exc.option_name}: {said}{hint}"
    if message.startswith("No such command"):
        return f"command: no such command{message[len('No such command') :]}{hint}"
    return f"{message[:1].lower()}{message[1:]}{hint}"


def _field(param: click.Parameter) -> str:
    """How an error names a parameter: an option by its long name (`--memory-types` →
    `memory_types`, as the MCP tools name it), an argument by its own."""
    if isinstance(param, click.Option):
        return max(param.opts, key=len).lstrip("-").replace("-", "_")
    return param.name or param.human_readable_name


def _cwd_exists() -> bool:
    try:
        os.getcwd()
    except FileNotFoundError:
        return False
    return True


def _damage_detail(line: str) -> str:
    """`line`, with the damaged table and fragment named when `doctor` can find them."""
    try:
        from octobrain.config import load_config, resolve_storage_uri
        from octobrain.knowledge.store import table_schemas
        from octobrain.store.doctor import diagnose
        from octobrain.store.location import StoreLocation

        config = load_config()
        location = StoreLocation.from_config(config, resolve_storage_uri(config))
        report = diagnose(location, table_schemas())
    except Exception:  # the generic line already says to run `octobrain doctor`
        return line
    damage = [p for p in report.problems if p.damage]
    if damage:
        return f"store {report.store}: {damage[0].line()} (see `octobrain doctor`)"
    return line


ROLE_OPTION = click.option(
    "--role",
    default="",
    callback=lambda ctx, param, value: check_label("--role", value),
    help="An agent's role (reviewer, planner): what it stores is that role's, and it sees that "
    "role's memories and those of no role (default: none, every role's seen).",
)

FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)


F = TypeVar("F", bound=Callable[..., Any])


def plural(n: int, word: str, plural_word: str) -> str:
    """`1 memory`, `2 memories`."""
    return f"{n:,} {word if n == 1 else plural_word}"


def scope_options(fn: F) -> F:
    """`--scope S` / `--global` on a command group; the choice lands in `ctx.obj`
    (`group_scope`)."""
    fn = click.option("--global", "global_", is_flag=True, help="Use the global scope instead.")(fn)
    return click.option(
        "--scope",
        multiple=True,
        callback=_one_scope,
        help="Project scope (default: derived from the cwd's git remote).",
    )(fn)


def _one_scope(ctx: click.Context, param: click.Parameter, given: tuple[str, ...]) -> str | None:
    """The scope `--scope` names, given once or more times alike (click kept the last)."""
    named = list(dict.fromkeys(given))
    if len(named) > 1:
        raise InvalidInput(
            "--scope",
            f"given as {as_json(named[0])} and as {as_json(named[1])}; give the scope once",
        )
    return named[0] if named else None


def group_scope(scope: str | None, global_: bool) -> dict[str, Any]:
    """What a `scope_options` group puts in `ctx.obj`: the scope it chose, and the option that
    chose it ("" when none did), which a subcommand's own option must not contradict."""
    given = "--global" if global_ else ("" if scope is None else f"--scope {scope}")
    return {"scope": chosen_scope(scope, global_), "given": given}


def chosen_scope(scope: str | None, global_: bool, cwd: Path | None = None) -> str:
    """The scope a command works in: `--global`, else `--scope`, else derived from the cwd."""
    if scope is not None and global_:
        raise InvalidInput("--global", "cannot be combined with --scope")
    if global_:
        return ""
    if scope is not None:
        from octobrain.scope import validate_scope

        if not validate_scope(scope):  # " " or "/": the global scope by another name
            raise InvalidInput("--scope", "must name a project; --global is the global scope")
        return scope
    from octobrain.scope import derive_scope

    return derive_scope(cwd or Path.cwd())


BrainFactory = Callable[[str, Path, str, str], "Brain"]
KnowledgeFactory = Callable[[str, str, Path], "Knowledge"]


class Warm:
    """What the resident service hands its commands in place of new objects: its pool's
    Brains and knowledge facades (`BrainCache`); None in a process of its own."""

    brain: BrainFactory | None = None
    knowledge: KnowledgeFactory | None = None


class OwnProcess:
    """The Brains a process of its own (`cli.launch`) opened for its command; None in any
    other (the service, a command run in a test's process)."""

    brains: list[Brain] | None = None

    @classmethod
    def finish(cls) -> None:
        """Once the command is done (its answer written, its commits made): each Brain that
        committed leaves the next new process a snapshot it reads without LanceDB
        (`Brain.leave_tail`). Never fails the command: what goes wrong is logged, and the
        next process reads the store."""
        for brain in cls.brains or ():
            try:
                brain.leave_tail()
            except Exception as exc:
                log.info("memory snapshot tail not left: %s", exc)
        cls.brains = None


def open_brain(scope: str, workdir: Path, session_id: str = "", role: str = "") -> Brain:
    """The Brain a command works with: a new one, or the resident service's warm one."""
    if Warm.brain is not None:
        return Warm.brain(scope, workdir, session_id, role)
    from octobrain.memory.brain import Brain

    brain = Brain(scope, workdir=workdir, session_id=session_id, role=role)
    if OwnProcess.brains is not None:
        OwnProcess.brains.append(brain)
    return brain


def open_knowledge(scope: str, session_id: str, cwd: Path) -> Knowledge:
    """The knowledge facade a command works with: a new one, or the resident service's."""
    if Warm.knowledge is not None:
        return Warm.knowledge(scope, session_id, cwd)
    from octobrain.knowledge import Knowledge

    return Knowledge(scope, session_id=session_id, cwd=cwd)


def _note_command_scope(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if param.name == "scope":
        value = _one_scope(ctx, param, value)
    if value is None or value is False:
        return
    # After the subcommand, an option the group's contradicts was taken over it, silently.
    given = "--global" if param.name == "global_" else f"--scope {value}"
    before = (ctx.find_object(dict) or {}).get("given")
    if before and before != given:
        raise InvalidInput(
            given.split(" ", 1)[0],
            f"contradicts {before}, given before `{ctx.info_name}`; give the scope once",
        )
    ctx.meta[f"octobrain.command_{param.name}"] = value


def whole_store_refusal(option: str, command: str) -> InvalidInput:
    """The error for `--scope` / `--global` given to a command that works on every scope."""
    return InvalidInput(
        option, f"`memory {command}` works on the whole store, every scope, and takes no {option}"
    )


def _refuse_scope(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value is not None and value is not False:
        raise whole_store_refusal(
            "--global" if param.name == "global_" else "--scope", ctx.info_name or ""
        )


def add_scope_options(group: click.Group, *, whole_store: Sequence[click.Command] = ()) -> None:
    """Give every subcommand of a `scope_options` group `--scope` / `--global` too, so they
    work after the subcommand (`memory remember x --global`); `command_scope` reads them.
    The `whole_store` ones work on every scope: there either option is refused (hidden from
    their help), never ignored."""
    for command in group.commands.values():
        if command in whole_store:
            command.params += [
                click.Option(["--scope"], expose_value=False, hidden=True, callback=_refuse_scope),
                click.Option(
                    ["--global", "global_"],
                    is_flag=True,
                    expose_value=False,
                    hidden=True,
                    callback=_refuse_scope,
                ),
            ]
            continue
        command.params += [
            click.Option(
                ["--scope"],
                multiple=True,
                expose_value=False,
                callback=_note_command_scope,
                help="Project scope (default: derived from the cwd's git remote).",
            ),
            click.Option(
                ["--global", "global_"],
                is_flag=True,
                expose_value=False,
                callback=_note_command_scope,
                help="Use the global scope instead.",
            ),
        ]


def command_scope(ctx: click.Context) -> str:
    """The scope a subcommand works in: its own `--scope` / `--global` if given, else the
    group's (`ctx.obj["scope"]`), else derived from the cwd."""
    scope = ctx.meta.get("octobrain.command_scope")
    global_ = ctx.meta.get("octobrain.command_global_", False)
    if scope is not None or global_:
        return chosen_scope(scope, global_)
    found: str = (ctx.find_object(dict) or {"scope": chosen_scope(None, False)})["scope"]
    return found


def scope_given(ctx: click.Context) -> str:
    """The scope option the command line gave (`--scope S` or `--global`, before or after the
    subcommand), or "" when the scope is derived from the cwd."""
    if ctx.meta.get("octobrain.command_global_"):
        return "--global"
    scope = ctx.meta.get("octobrain.command_scope")
    if scope is not None:
        return f"--scope {scope}"
    return str((ctx.find_object(dict) or {}).get("given", ""))


def split_values(values: Sequence[str], filter_field: str = "") -> list[str]:
    """`--tags a,b --tags c` → [a, b, c]. As a filter (`filter_field`, the name the error gives),
    an option given only blanks (`--tags ""`, what an unset shell variable makes) is refused:
    read as no filter, it made `forget --query … --tags "$TAG" --yes` delete every match."""
    parts = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if filter_field and values and not parts:
        raise InvalidInput(
            filter_field, "must hold at least one non-blank value; leave it out for no filter"
        )
    return parts


def emit(fmt: str, data: Any, text: str) -> None:
    """Print `data` as JSON under `--format json`, else `text`."""
    if fmt == "json":
        emit_json(data)
    else:
        click.echo(on_terminal(text))  # stored text may hold terminal escapes


def emit_json(data: Any) -> None:
    """Print `data` as every `--format json` answer is printed: indented, non-ASCII text as
    itself (a path or title in any language reads as written), nothing a terminal acts on."""
    click.echo(json_printable(data, indent=2))


def command_brain(ctx: click.Context, *, lazy_sleep: bool = True) -> Brain:
    """The Brain a `memory …` subcommand works on: its scope, its role (`memory --role`), the
    cwd, a due sleep pass started in the background unless `lazy_sleep` is off."""
    from octobrain.memory.sleep_startup import start_background_sleep

    scope = command_scope(ctx)
    role: str = (ctx.find_object(dict) or {}).get("role", "")
    brain = open_brain(scope, Path.cwd(), role=role)
    if lazy_sleep:  # a due sleep pass runs in the background; it never fails this command
        start_background_sleep(brain)
    return brain


def stdin_is_terminal() -> bool:
    """Whether a person at a terminal can answer a question on stdin."""
    return sys.stdin.isatty()


def cannot_ask(yes: bool) -> bool:
    """Whether a command that asks before it acts must refuse: no `--yes`, and no terminal to
    ask on (a script, a pipe). Such a command raises `yes_required`."""
    return not yes and not stdin_is_terminal()


def yes_required(doing: str, note: str = "") -> InvalidInput:
    """The refusal of a command that cannot ask before `doing` (`cannot_ask`)."""
    return InvalidInput("--yes", f"required to {doing} without a terminal to confirm on{note}")


def counted_damaged(*found: tuple[str, Sequence[str], int, str | None]) -> OctobrainError:
    """The line a `stats` command ends with, exit 1, when it counted rows that no longer
    match their checksum: of each `(table, the first of them, how many, where they were
    counted)` with any, named as a read of one names them, and where they were counted
    (None: under `DAMAGED_TITLE`, among the counts by value)."""
    from octobrain.errors import StorageError
    from octobrain.store.schema import DAMAGED_TITLE, describe_garbled

    said = "; ".join(
        f"table {table!r} is damaged: {describe_garbled(ids, count, table)}; counted "
        f"{where or f'under {DAMAGED_TITLE!r}'}"
        for table, ids, count, where in found
        if count
    )
    return StorageError(f"store: {said}. Run `octobrain doctor` for details")
