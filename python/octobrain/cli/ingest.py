"""`octobrain memory ingest FILE`: a conversation transcript into memory, one memory per turn."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import click

from octobrain.cli.common import FORMAT_OPTION, emit_json
from octobrain.cli.progress import progress_bar
from octobrain.errors import InvalidInput
from octobrain.memory.conversation_formats import FORMATS

if TYPE_CHECKING:
    from octobrain.memory.turns import Conversation


@click.command("ingest")
@click.argument("file", type=click.Path(allow_dash=True))
@click.option(
    "--format-in",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="The transcript's format: a Claude Code JSONL session, a chat export of "
    "{speaker, text, time} records (JSON or JSONL; time ISO-8601, or Unix seconds or "
    "milliseconds; also as exports spell them: {role, content} of an OpenAI messages list, "
    "Slack's {user, text, ts}, Discord's {author, content, timestamp}), LoCoMo, or a "
    "Claude.ai (claude-ai) or ChatGPT (chatgpt) data export's conversations.json, each "
    "conversation stored under its id, or a WhatsApp chat's text export (whatsapp; "
    "whatsapp-dmy or whatsapp-mdy: its dates day or month first); auto detects it.",
)
@click.option(
    "--conversation",
    "name",
    default=None,
    metavar="NAME",
    help="Store the file's conversation under NAME (default: its own id, a Claude Code "
    "session id or a LoCoMo sample_id, else the file's name without its extension). "
    "Ingest a grown file again with the same NAME.",
)
@FORMAT_OPTION
@click.pass_context
def ingest_cmd(ctx: click.Context, file: str, format_in: str, name: str | None, fmt: str) -> None:
    """Store a conversation turn by turn (turns already stored are skipped).

    Each turn is one memory: shown as it was said, indexed with its speaker, its session's
    date and its neighbouring turns, and linked to the previous turn of its session.
    FILE may be gzip-compressed (at most 64 MiB either way); - reads standard input (a
    chat export's turns then need --conversation NAME). A Slack export's folder (or one
    channel's) or its .zip is read whole: each channel one conversation, named by its
    folder, of its day files in date order (at most 64 MiB in all).
    """
    import sys

    from octobrain.cli.common import command_brain
    from octobrain.memory.conversation import read_conversations, read_piped_conversations
    from octobrain.memory.slack_export import is_export, read_export

    if not file.strip():  # (read as the cwd: "file: . is a directory")
        raise InvalidInput("file", "must name a conversation file, or - for standard input")
    skipped: int | None = None  # a Slack export's files that are not its day files or lists
    if file == "-":
        conversations = read_piped_conversations(sys.stdin.buffer, format_in, name=name)
    elif is_export(file):
        if name is not None:
            raise InvalidInput(
                "conversation",
                f"names one conversation; {file} is a Slack export (a folder or a .zip): each "
                "channel is stored under its folder's name",
            )
        if format_in not in ("auto", "chat"):
            raise InvalidInput("format_in", f"must be auto or chat for {file}, a Slack export")
        export = read_export(file)
        conversations, skipped = export.conversations, export.skipped
    else:
        conversations = read_conversations(file, format_in, name=name)
    brain = command_brain(ctx)
    total = sum(len(c.turns) for c in conversations)
    if total == 0:  # said, not refused: a transcript can hold no turn yet
        how = f"as {format_in}" if format_in != "auto" else "in the format detected"
        where = "standard input" if file == "-" else file
        click.echo(
            f"warning: {where}: no turns found in it {how}; --format-in "
            f"{'|'.join(FORMATS[1:])} forces a format",
            err=True,
        )
    with progress_bar(total, "ingesting") as progress:
        started = itertools.count(1)  # (conversations are begun in their order, each once)

        def begun(conv: Conversation) -> None:  # (an export's channels: which one is under way)
            at = next(started)
            if len(conversations) > 1:
                progress.relabel(f"ingesting {conv.title or conv.key} ({at}/{len(conversations)})")

        report = brain.ingest(conversations, progress=progress, begun=begun)
    if report.undated:  # (an old export stored as said today, unsaid, misled every date asked)
        click.echo(
            f"warning: {report.undated} turns have no time: each is dated when first ingested, "
            "not when it was said (--after, --before and a question naming a date read it so); "
            "a time on each turn dates it",
            err=True,
        )
    if fmt == "json":
        emit_json({"scope": brain.scope, **report.__dict__, **_files_skipped(skipped)})
        return
    named = (  # the name a file's turns are stored under: another file of that name adds to it
        f"conversation {conversations[0].key!r}"
        if len(conversations) == 1
        else f"{len(conversations)} conversations"
    )
    click.echo(
        f"ingested {report.turns} turn{'' if report.turns == 1 else 's'} of {named} into "
        f"{brain.scope or '(global)'}: "
        f"{report.summary(str(report.added))}, {report.links} links"
        + (f", {_other_files(skipped)} skipped" if skipped else "")
    )


def _other_files(skipped: int) -> str:
    """A Slack export's files read as neither a day file nor a list, as the summary says."""
    files = "file" if skipped == 1 else "files"
    return f"{skipped} other {files} (not a channel's day file, <channel>/<YYYY-MM-DD>.json)"


def _files_skipped(skipped: int | None) -> dict[str, int]:
    """The JSON reply's count of a Slack export's files skipped, when an export was read."""
    return {} if skipped is None else {"files_skipped": skipped}
