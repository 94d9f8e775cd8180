"""`octobrain memory …` commands that curate the whole store: export and import, re-embedding,
rebuilding the indexes, the sleep pass, goal consolidation and its undo, the store's history
and restore.

They run in-process (never through the resident service) and are added to the `memory` group
by `cli/memory.py`."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    cannot_ask,
    command_brain,
    emit,
    plural,
    scope_given,
    yes_required,
)
from octobrain.cli.progress import progress_bar
from octobrain.errors import InvalidInput
from octobrain.files import cannot_write, drop_dead_leftovers, replaced_by_write
from octobrain.scope import GLOBAL_SCOPE

if TYPE_CHECKING:
    from octobrain.memory.transfer import ImportReport


@click.command("export")
@click.argument("output", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.option("--embeddings", is_flag=True, help="Include embedding vectors.")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.pass_context
def export_cmd(ctx: click.Context, output: str, embeddings: bool, force: bool) -> None:
    """Write visible memories (this scope's and the global ones; with `--role R`, R's and those
    of no role) and their links as JSONL (to OUTPUT or stdout); `memory import` brings them
    back in those scopes, each with its role."""
    from octobrain.memory.export import export_jsonl

    if output == "-":
        brain = command_brain(ctx)
        with _utf8_stdout() as out:
            _warn(export_jsonl(brain, out, embeddings=embeddings).warning())
        return
    if not output.strip():  # ("output:  is a directory", of the cwd it resolved to)
        raise InvalidInput("output", "must name a file to write, or - for stdout")
    if output.endswith(os.sep) and not os.path.isdir(output):  # (wrote a file named `sub`)
        raise InvalidInput("output", f"{output} names a folder that does not exist; name a file")
    # A file is written beside OUTPUT and moved over it once complete: an export cut short
    # (killed, a full disk) leaves the file that was there, never a part of the new one.
    target = replaced_by_write(Path(output))  # a symlink stays one: its target is written
    _regular_or_absent(output, target)
    if Path(output).exists() and not force:
        raise InvalidInput("output", f"{output} already exists; pass --force to overwrite it")
    brain = command_brain(ctx)
    drop_dead_leftovers(target, ".partial")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    # A new file of our own, opened without waiting: whatever took its name (a FIFO would
    # block the open until a reader came) is refused.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    made = False
    try:
        fd = os.open(partial, flags, 0o666)
        made = True
        with contextlib.suppress(FileNotFoundError):  # the file replaced keeps its mode
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))  # (a private one stays so)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            total = brain.store.count()
            label = f"exporting up to {plural(total, 'memory', 'memories')} to {output}"
            with progress_bar(total, label) as progress:
                done = export_jsonl(brain, out, embeddings=embeddings, progress=progress)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except OSError as exc:
        raise cannot_write("output", output, exc, "; nothing was written") from None
    finally:
        if made:
            partial.unlink(missing_ok=True)
    click.echo(f"exported {plural(done.count, 'memory', 'memories')} to {output}", err=True)
    _warn(done.warning())


@contextlib.contextmanager
def _utf8_stdout() -> Iterator[TextIO]:
    """Standard output as the export's text is written to it: UTF-8, what `memory import`
    reads, whatever the locale's encoding (a Latin-1 one wrote `é` as a byte import refused,
    and failed at the first character it lacked)."""
    stdout = sys.stdout
    if codecs.lookup(stdout.encoding or "utf-8").name == "utf-8":
        yield stdout
        return
    stdout.flush()
    out = io.TextIOWrapper(stdout.buffer, encoding="utf-8", write_through=True)
    try:
        yield out
    finally:
        out.flush()
        out.detach()  # (stdout's buffer stays open)


def _warn(line: str) -> None:
    if line:
        click.echo(line, err=True)


def _regular_or_absent(output: str, target: Path) -> None:
    """Refuse an export destination that is there and not a regular file: a FIFO nobody
    reads blocked the export for good, and a device would be replaced by a file."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise cannot_write("output", output, exc, "; nothing was written") from None
    if stat.S_ISDIR(mode):
        raise InvalidInput("output", f"{output} is a directory; nothing was written")
    if not stat.S_ISREG(mode):
        raise InvalidInput(
            "output",
            f"{output} is not a regular file (give - for standard output); nothing was written",
        )


@click.command("import")
@click.argument("source", type=click.Path(allow_dash=True))
@FORMAT_OPTION
@click.pass_context
def import_cmd(ctx: click.Context, source: str, fmt: str) -> None:
    """Import a JSONL export (ids already present are skipped). The whole file is checked
    before anything is written. Memories keep the scopes the file gives them (an export
    holds its scope's memories and the global ones), and what was written is counted by
    scope: an import moves no memory into another project, so a `--scope` or `--global`
    given for a file holding another project's memories is refused. Each memory keeps its
    role too: with `--role R`, a file holding another role's memories is refused."""
    import tempfile

    from octobrain.files import named_by, open_regular
    from octobrain.memory.import_check import check_import, file_lines
    from octobrain.memory.transfer import write_import

    brain, given = command_brain(ctx), scope_given(ctx)
    # Lines as bytes: each is decoded on its own, so a line that is not UTF-8 is named. A named
    # file must be a regular one: a FIFO would wait for a writer, /dev/zero never ends.
    handle: BinaryIO = sys.stdin.buffer
    if source != "-":
        with named_by("source", source, "is a directory, not an export file"):
            handle = open_regular(source)[0]
    name = "standard input" if source == "-" else source
    try:
        with tempfile.TemporaryFile(prefix="octobrain-import-") as spool:
            size = _regular_size(handle)
            if not size:  # a pipe, or a file whose size says nothing (/proc): no bar
                checked = check_import(brain, file_lines(handle, name), spool, given=given)
            else:
                with progress_bar(size, f"checking {source}") as progress:
                    lines = file_lines(handle, name)
                    checked = check_import(brain, lines, spool, checked=progress, given=given)
            label = f"importing {plural(checked.count, 'memory', 'memories')} from {source}"
            with progress_bar(checked.count, label) as progress:
                whole = "-" if source == "-" else os.path.abspath(source)  # (for `doctor`)
                report = write_import(brain, checked, progress=progress, name=whole)
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    emit(
        fmt,
        report.__dict__,
        f"imported {plural(report.imported, 'memory', 'memories')}"
        + _by_scope(report.scopes, brain.scope)
        + ", skipped "
        f"{report.skipped_existing} already present, "
        f"{plural(report.relationships, 'relationship', 'relationships')}"
        + f" ({report.relationships_existing:,} already present)"
        * bool(report.relationships_existing)
        + f", {report.reembedded:,} re-embedded"
        + f", {plural(report.consolidations, 'consolidation record', 'consolidation records')}"
        * bool(report.consolidations)
        + f" ({report.consolidations_existing:,} already present)"
        * bool(report.consolidations_existing)
        + (
            f"; {plural(report.consolidations_not_brought, 'consolidation record', 'records')} "
            "not stored: they name memories or edges this import did not write"
        )
        * bool(report.consolidations_not_brought)
        + _edges_refused(report),
    )


def _edges_refused(report: ImportReport) -> str:
    """`; N relationships not stored: …`, each reason with its count, or ""."""
    reasons = [
        f"{n:,} {why}"
        for n, why in (
            (report.relationships_missing_end, "with an end the store does not hold"),
            (report.relationships_across_projects, "joining two projects"),
            (report.relationships_unrecorded, "of a consolidation whose record is not stored"),
            (
                report.relationships_contradicting,
                "contradicting the links between their memories (a supersedes cycle, a "
                "conflicts link beside a supersedes, a one-way link backwards, a second goal "
                "one memory closes)",
            ),
        )
        if n
    ]
    if not reasons:
        return ""
    edges = plural(report.relationships_not_stored, "relationship", "relationships")
    return f"; {edges} not stored: {', '.join(reasons)}"


def _by_scope(scopes: dict[str, int], own: str, shown: int = 5) -> str:
    """` (N in <scope>, M global, …)` for an import that wrote beyond the command's scope."""
    if not scopes or set(scopes) == {own}:
        return ""
    named = [f"{n:,} {'global' if s == GLOBAL_SCOPE else 'in ' + s}" for s, n in scopes.items()]
    more = len(named) - shown
    rest = f", and {plural(more, 'other scope', 'other scopes')}" if more > 0 else ""
    return f" ({', '.join(named[:shown])}{rest})"


def _regular_size(handle: BinaryIO) -> int | None:
    """The size of the regular file `handle` reads, else None (a pipe, a terminal)."""
    try:
        status = os.fstat(handle.fileno())
    except (OSError, ValueError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


@click.command("reembed")
@FORMAT_OPTION
@click.pass_context
def reembed_cmd(ctx: click.Context, fmt: str) -> None:
    """Re-embed every memory, of every scope, with the configured model (after changing
    embedding.model)."""
    from octobrain.memory.transfer import reembed

    brain = command_brain(ctx, lazy_sleep=False)
    model = brain.embedder.model_id
    total = brain.store.open_memories_unchecked().count_rows()
    with progress_bar(total, f"re-embedding with {model}") as progress:
        n = reembed(brain, progress=progress)
    emit(
        fmt,
        {"reembedded": n, "model": model},
        f"re-embedded {plural(n, 'memory', 'memories')} with {model}",
    )


@click.command("reindex")
@FORMAT_OPTION
@click.pass_context
def reindex_cmd(ctx: click.Context, fmt: str) -> None:
    """Drop the memories table's indexes (every scope's) and build them again (when `doctor`
    finds one damaged)."""
    store = command_brain(ctx, lazy_sleep=False).store
    dropped, built = store.reindex()
    emit(
        fmt,
        {"dropped": list(dropped), "built": list(built)},
        f"dropped {plural(len(dropped), 'index', 'indexes')}"
        + (f" ({', '.join(dropped)})" if dropped else "")
        + f", built {plural(len(built), 'index', 'indexes')}"
        + (f" ({', '.join(built)})" if built else " (none pays at this size)"),
    )


@click.command("sleep-consolidate")
@click.option(
    "--threshold",
    type=float,
    default=None,
    help="Cosine similarity (default: consolidation.threshold, 0.85).",
)
@click.option(
    "--min-size",
    type=int,
    default=None,
    help="Smallest cluster merged (default: consolidation.min_cluster_size, 3).",
)
@click.option(
    "--max-age-days",
    type=float,
    default=None,
    help="Only newer memories (default: consolidation.max_age_days, 7.0).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be merged; change nothing.")
@FORMAT_OPTION
@click.pass_context
def sleep_consolidate_cmd(
    ctx: click.Context,
    threshold: float | None,
    min_size: int | None,
    max_age_days: float | None,
    dry_run: bool,
    fmt: str,
) -> None:
    """Merge clusters of recent near-duplicate memories now (and archive faded ones)."""
    from octobrain.memory.render import consolidation_to_dict, format_consolidation

    report = command_brain(ctx, lazy_sleep=False).sleep_consolidate(
        threshold=threshold, min_size=min_size, max_age_days=max_age_days, dry_run=dry_run
    )
    verb = "would merge" if dry_run else "merged"
    lines = [
        f"{report.candidates} recent working memories in scope {report.scope or '(global)'}"
        + (
            f" ({report.held_back} of them not merged again: undone by `unconsolidate`, "
            "merged already, or findings of an open goal)"
            if report.held_back
            else ""
        )
        + f"; {verb} {plural(len(report.consolidations), 'cluster', 'clusters')}"
        + (f", {report.skipped} skipped (changed meanwhile)" if report.skipped else "")
        + f"; {'would archive' if dry_run else 'archived'} {len(report.archived)}"
        + f"; {'would record' if dry_run else 'recorded'} "
        + f"{plural(len(report.conflicts), 'conflict', 'conflicts')}."
    ]
    lines += [format_consolidation(c) for c in report.consolidations]
    if report.conflicts:
        lines.append(
            "Conflicts (the same thing stated with another value; the first ranks above):\n"
            + "\n".join(f"  {c.winner} over {c.loser} ({c.reason})" for c in report.conflicts)
        )
    if report.disagreements:
        lines.append(
            "Disagreements left to you (equally trusted, both recent; link the right one with "
            "`supersedes`):\n" + "\n".join(f"  {a} / {b}" for a, b in report.disagreements)
        )
    if report.unchecked:
        lines.append(
            f"{plural(report.unchecked, 'older memory', 'older memories')} "
            "not checked for conflicts yet: over the pass's budget of compared pairs. Each pass "
            "checks those written since the last first, then goes on from where the last "
            "stopped; one stays in the check past the window until a pass reaches it"
            + (" (a dry run moves nothing on)." if dry_run else ".")
        )
    if report.damaged_records:
        lines.append(report.damage_said())
    data = {
        "scope": report.scope,
        "dry_run": dry_run,
        "candidates": report.candidates,
        "held_back": report.held_back,
        "consolidations": [consolidation_to_dict(c) for c in report.consolidations],
        "skipped": report.skipped,
        "archived": report.archived,
        "conflicts": [
            {"prevails": c.winner, "outranked": c.loser, "reason": c.reason}
            for c in report.conflicts
        ],
        "disagreements": [list(pair) for pair in report.disagreements],
        "unchecked": report.unchecked,
        "damaged_records": report.damaged_records,
    }
    emit(fmt, data, "\n\n".join(lines))


@click.command("consolidate")
@click.argument("goal_id")
@FORMAT_OPTION
@click.pass_context
def consolidate_cmd(ctx: click.Context, goal_id: str, fmt: str) -> None:
    """Close GOAL_ID: consolidate the memories that achieve it under its closing memory."""
    from octobrain.memory.render import consolidation_to_dict, format_consolidation

    done = command_brain(ctx, lazy_sleep=False).consolidate_goal(goal_id)
    emit(fmt, consolidation_to_dict(done), format_consolidation(done))


@click.command("unconsolidate")
@click.argument("parent_id")
@FORMAT_OPTION
@click.pass_context
def unconsolidate_cmd(ctx: click.Context, parent_id: str, fmt: str) -> None:
    """Undo a consolidation: restore its members exactly, remove a synthesised parent (one you
    edited since is kept, an ordinary memory)."""
    undone = command_brain(ctx, lazy_sleep=False).unconsolidate(parent_id)
    text = (
        f"restored {plural(len(undone.restored), 'memory', 'memories')}"
        + (f"; removed the synthesised parent {undone.parent_id}" if undone.parent_removed else "")
        + (
            f"; kept the merged memory {undone.parent_id} as an ordinary memory: you edited it "
            "since the merge, so it holds words of yours (`forget` it if it is no longer wanted)"
            if undone.parent_kept
            else ""
        )
    )
    emit(fmt, undone.__dict__, text)


@click.command("history")
@click.option(
    "-l", "--limit", type=int, default=20, show_default=True, help="Versions shown (1–10000)."
)
@FORMAT_OPTION
@click.pass_context
def history_cmd(ctx: click.Context, limit: int, fmt: str) -> None:
    """The store's kept versions (every scope; a week of every write), newest first."""
    versions = command_brain(ctx, lazy_sleep=False).history(limit)
    rows = [
        {"version": v.version, "timestamp": v.timestamp.isoformat(), "memories": v.rows}
        | ({"note": v.note} if v.note else {})
        | ({"damage": v.damage} if v.damage else {})
        for v in versions
    ]
    text = "\n".join(
        f"{v.version:>6}  {v.timestamp:%Y-%m-%d %H:%M:%S} UTC  "
        + plural(v.rows, "memory", "memories")
        + (f" (no memory changed: this version {v.note})" if v.note else "")
        + (f" (damaged: {v.damage}; it cannot be read or restored)" if v.damage else "")
        for v in versions
    )
    emit(fmt, rows, text or "No versions.")


# A negative version (`restore -1`) is a bad version, not an unknown option: unknown options
# reach VERSION, which names them (`'--x' is not a valid integer`) or refuses the number.
@click.command("restore", context_settings={"ignore_unknown_options": True})
@click.argument("version", type=int)
@click.option("-y", "--yes", is_flag=True, help="Restore without asking.")
@FORMAT_OPTION
@click.pass_context
def restore_cmd(ctx: click.Context, version: int, yes: bool, fmt: str) -> None:
    """Return the whole store (all scopes) to VERSION; the restore itself can be undone."""
    from octobrain.memory.curation import check_version

    check_version(version)  # before asking to confirm a restore that cannot be
    brain = command_brain(ctx, lazy_sleep=False)
    if cannot_ask(yes):
        raise yes_required("restore")
    # (The question on stderr: stdout is the answer's, which `--format json` keeps JSON.)
    asked = f"Restore every scope of {brain.uri} to version {version}?"
    if not yes and not click.confirm(asked, err=True):
        emit(fmt, {"restored": None}, "Nothing restored.")  # a person declining: no error
        return
    now = brain.restore(version, confirm=True)
    emit(
        fmt,
        {"restored": version, "version": now.version, "memories": now.rows},
        f"restored version {version}: now version {now.version} with "
        f"{plural(now.rows, 'memory', 'memories')}",
    )


CURATION_COMMANDS = [
    export_cmd,
    import_cmd,
    reembed_cmd,
    reindex_cmd,
    sleep_consolidate_cmd,
    consolidate_cmd,
    unconsolidate_cmd,
    history_cmd,
    restore_cmd,
]

# Commands on the whole store, every scope: they refuse `--scope` / `--global` (`cli/memory.py`).
WHOLE_STORE_COMMANDS = (reembed_cmd, reindex_cmd, history_cmd, restore_cmd)
