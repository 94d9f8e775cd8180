"""`octobrain memory ingest FILE`: a conversation transcript into memory, one memory per turn."""

from __future__ import annotations

import click

from octobrain.cli.common import FORMAT_OPTION, emit_json
from octobrain.cli.progress import progress_bar
from octobrain.errors import InvalidInput
from octobrain.memory.conversation_formats import FORMATS


@click.command("ingest")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
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
    chat export's turns then need --conversation NAME).
    """
    import sys

    from octobrain.cli.common import command_brain
    from octobrain.memory.conversation import read_conversations, read_piped_conversations

    if not file.strip():  # (read as the cwd: "file: . is a directory")
        raise InvalidInput("file", "must name a conversation file, or - for standard input")
    if file == "-":
        conversations = read_piped_conversations(sys.stdin.buffer, format_in, name=name)
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
        report = brain.ingest(conversations, progress=progress)
    if report.undated:  # (an old export stored as said today, unsaid, misled every date asked)
        click.echo(
            f"warning: {report.undated} turns have no time: each is dated when first ingested, "
            "not when it was said (--after, --before and a question naming a date read it so); "
            "a time on each turn dates it",
            err=True,
        )
    if fmt == "json":
        emit_json({"scope": brain.scope, **report.__dict__})
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
    )
