"""`octobrain brief` and `octobrain hook …`: the session briefing and Claude Code's hooks."""

from __future__ import annotations

import difflib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    ROLE_OPTION,
    OctobrainGroup,
    cannot_ask,
    chosen_scope,
    emit_json,
    open_brain,
    write_atomic_file,
    yes_required,
)
from octobrain.errors import InvalidInput, as_json
from octobrain.safe_text import check_label, on_terminal

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain
    from octobrain.memory.hooks import HookInput

log = logging.getLogger(__name__)


def _scope(scope: str | None, global_: bool, cwd: Path) -> str:
    return chosen_scope(scope, global_, cwd)


def _brain(scope: str, cwd: Path, role: str, session_id: str = "") -> Brain:
    return open_brain(scope, cwd, session_id, role)


@click.command("brief")
@click.option("--scope", help="Project scope (default: derived from the cwd's git remote).")
@click.option("--global", "global_", is_flag=True, help="Brief on global memories only.")
@ROLE_OPTION
@click.option(
    "--max-tokens", type=int, default=None, help="Token budget (default: brief.max_tokens, 1500)."
)
@FORMAT_OPTION
def brief(scope: str | None, global_: bool, role: str, max_tokens: int | None, fmt: str) -> None:
    """Print the session briefing: preferences, project truths, goals, recent (Markdown)."""
    from octobrain.memory.briefing import build_briefing
    from octobrain.memory.render_brief import briefing_markdown, briefing_to_dict

    briefing = build_briefing(
        _brain(_scope(scope, global_, Path.cwd()), Path.cwd(), role), max_tokens=max_tokens
    )
    if fmt == "json":
        emit_json(briefing_to_dict(briefing))
    else:
        click.echo(on_terminal(briefing_markdown(briefing)), nl=False)


@click.group("hook", cls=OctobrainGroup)
def hook() -> None:
    """Lifecycle hooks for Claude Code (read the hook's JSON on stdin)."""


def _read_hook() -> HookInput:
    from octobrain.cli.service_client import HOOK_INPUT_BYTES
    from octobrain.memory.hooks import hook_text, parse_hook_input

    # JSON is UTF-8, whatever this process's stdin decodes (a Windows code page,
    # PYTHONIOENCODING=latin-1): decoded as that, `/home/josé` was `/home/josÃ©`, another scope.
    stdin = getattr(sys.stdin, "buffer", None)
    raw = stdin.read(HOOK_INPUT_BYTES + 1) if stdin is not None else b""
    if len(raw) > HOOK_INPUT_BYTES:
        raise InvalidInput("stdin", f"the hook's JSON must be at most {HOOK_INPUT_BYTES:,} bytes")
    return parse_hook_input(hook_text(raw))


def _fail_open(what: str, exc: Exception) -> None:
    # A hook must never break the user's session: report on stderr, exit 0.
    click.echo(f"octobrain {what}: {str(exc) or type(exc).__name__}", err=True)


@hook.command("session-start")
@click.option("--scope", help="Override the scope derived from the hook's cwd.")
@ROLE_OPTION
@click.option(
    "--max-tokens",
    type=int,
    default=None,
    help="Token budget of the briefing (default: brief.max_tokens, 1500).",
)
def hook_session_start(scope: str | None, role: str, max_tokens: int | None) -> None:
    """Print the briefing as SessionStart hookSpecificOutput.additionalContext JSON."""
    from octobrain.memory.briefing import build_briefing
    from octobrain.memory.hooks import session_start_output
    from octobrain.memory.render_brief import briefing_markdown

    try:
        data = _read_hook()
        cwd = Path(data.cwd) if data.cwd else Path.cwd()
        brain = _brain(_scope(scope, False, cwd), cwd, role, data.session_id)
        text = briefing_markdown(build_briefing(brain, max_tokens=max_tokens))
    except Exception as exc:
        _fail_open("session-start", exc)
        return
    click.echo(session_start_output(text))


def _digest(scope: str | None, role: str, event: str) -> None:
    from octobrain.memory.session_digest import store_digest
    from octobrain.memory.transcript_file import start_of
    from octobrain.memory.transcript_parts import transcript_part

    try:
        data = _read_hook()
        if not data.transcript_path:
            raise InvalidInput("stdin.transcript_path", "is missing; nothing to digest")
        cwd = Path(data.cwd) if data.cwd else Path.cwd()
        brain = _brain(_scope(scope, False, cwd), cwd, role, data.session_id)
        tag = data.tag
        start = start_of(tag, data.transcript_path, brain.uri, brain.scope)
        part = transcript_part(data.transcript_path, data.cwd, start)
        memory = store_digest(brain, data, part)
    except Exception as exc:
        _fail_open(event, exc)
        return
    if memory is not None:
        click.echo(f"octobrain: session digest stored as {memory.id}", err=True)
    if not part.done:
        # One hook reads a bounded part, to end inside Claude Code's timeout; the rest is read
        # by a process of its own, part by part, each recorded as it is stored.
        left = f"{part.end / 2**20:,.0f} of its {part.size / 2**20:,.0f} MiB read"
        try:
            # (only on from a point recorded further than this one began: never round again)
            on = start_of(tag, data.transcript_path, brain.uri, brain.scope) > part.start
            pid = _read_on(data, scope, role, event) if on else None
        except OSError as exc:
            pid, left = None, f"{left}; {exc.strerror or exc}"
        more = f"the rest is read by process {pid}" if pid else "the session's next hook reads on"
        click.echo(f"octobrain {event}: the transcript is long ({left}); {more}", err=True)


def _read_on(data: HookInput, scope: str | None, role: str, event: str) -> int:
    """Start `octobrain hook <event>` again, on its own (not stopped with the hook that started
    it), with the same hook JSON: it reads on from where this one stopped. Its stderr goes to
    `<data dir>/hooks/read-on.log`."""
    import json
    import os
    import subprocess
    import tempfile

    from octobrain.config.loader import data_dir

    given = {**data.raw, "transcript_path": os.path.abspath(data.transcript_path)}
    argv = [sys.executable, "-m", "octobrain", "hook", event]
    argv += ["--scope", scope] if scope else []
    argv += ["--role", role] if role else []
    log_dir = data_dir() / "hooks"
    log_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as stdin, open(log_dir / "read-on.log", "ab") as log:
        stdin.write(json.dumps(given).encode("utf-8"))
        stdin.seek(0)
        process = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    return process.pid


@hook.command("pre-compact")
@click.option("--scope", help="Override the scope derived from the hook's cwd.")
@ROLE_OPTION
def hook_pre_compact(scope: str | None, role: str) -> None:
    """Store a digest of the transcript before Claude Code compacts it."""
    _digest(scope, role, "pre-compact")


@hook.command("session-end")
@click.option("--scope", help="Override the scope derived from the hook's cwd.")
@ROLE_OPTION
def hook_session_end(scope: str | None, role: str) -> None:
    """Store (or refresh) the digest of the session's transcript when it ends."""
    _digest(scope, role, "session-end")


@hook.command("install")
@click.option(
    "--settings",
    "settings_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Settings file to edit (default: ~/.claude/settings.json).",
)
@click.option("--project", is_flag=True, help="Edit ./.claude/settings.json instead.")
@click.option(
    "--command",
    "command",
    default=None,
    help="How Claude Code runs octobrain (default: the absolute path of the `octobrain` on "
    "PATH now, since hooks do not run inside your virtualenv).",
)
@click.option(
    "--role",
    default=None,
    callback=lambda ctx, param, value: None if value is None else check_label("--role", value),
    help="The agent's role the hooks brief and store digests as (`hook session-start --role "
    "R`, …): set in hooks installed before, with or without another role; --role '' takes it "
    "out. Not given: the role installed hooks run as is kept.",
)
@click.option("--yes", "-y", is_flag=True, help="Write without asking.")
def hook_install(
    settings_path: Path | None, project: bool, command: str | None, role: str | None, yes: bool
) -> None:
    """Add octobrain's SessionStart, PreCompact and SessionEnd hooks (idempotent)."""
    from octobrain.memory.hook_settings import (
        default_command,
        hook_command,
        install_hooks,
        load_settings,
        render_settings,
    )

    if settings_path is not None and project:
        raise InvalidInput("--project", "cannot be combined with --settings")
    if command is not None and not command.strip():  # given empty: a mistake, not the default
        raise InvalidInput(
            "--command",
            f"must be how to run octobrain (e.g. /usr/local/bin/octobrain), got {as_json(command)}",
        )
    if settings_path is None:
        base = Path.cwd() if project else Path.home()
        settings_path = base / ".claude" / "settings.json"
    old_text, settings = load_settings(settings_path)
    new_settings, added = install_hooks(
        settings, hook_command(command) if command else default_command(), role
    )
    if not added:
        click.echo(f"octobrain hooks are already installed in {settings_path}")
        return
    new_text = render_settings(new_settings)
    diff = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=f"{settings_path} (as it is)",
        tofile=f"{settings_path} (with the octobrain hooks)",
    )
    # Refused for want of a terminal, the diff is shown on stderr: stdout stays empty.
    refused = cannot_ask(yes)
    click.echo("".join(diff), nl=False, err=refused)
    if not yes:
        if refused:  # the rule `memory forget` follows
            raise yes_required("write", " (nothing written)")
        # (The question on stderr, as `memory forget` asks: stdout is the answer's.)
        if not click.confirm(f"Write {settings_path}?", default=True, err=True):
            click.echo("nothing written")
            return
    write_atomic_file(settings_path, new_text, "settings")
    click.echo(f"hooks written to {settings_path}: {', '.join(added)}")
