"""`octobrain knowledge …`: index, search, read and grep documents. Thin: parse, call, format."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    OctobrainGroup,
    UserError,
    UserFailure,
    add_scope_options,
    command_scope,
    counted_damaged,
    emit_json,
    group_scope,
    open_knowledge,
    scope_options,
)
from octobrain.cli.progress import progress_of_total
from octobrain.safe_text import on_terminal, printable

if TYPE_CHECKING:
    from octobrain.knowledge import Knowledge

CLI_SESSION = "cli"  # the one default for store, delete and search, so they see each other
SESSION_OPTION = click.option(
    "--session-id",
    default=CLI_SESSION,
    show_default=True,
    help="Session whose notes (stored://KEY) to use.",
)


@contextmanager
def _source_option() -> Iterator[None]:
    """A refused `--source` value named by its option, as the other options' errors are."""
    from octobrain.errors import InvalidInput

    try:
        yield
    except InvalidInput as err:
        if err.field != "source":
            raise
        named = InvalidInput("--source", err.rule)
        named.input_fault = err.input_fault  # (a server that failed is still no mistake: 1)
        raise named from None


def _emit(fmt: str, result: Any, text: str) -> None:
    if fmt == "json":
        from octobrain.knowledge.render import to_dict

        emit_json(to_dict(result))
    else:
        click.echo(on_terminal(text))


@click.group("knowledge", cls=OctobrainGroup)
@scope_options
@click.pass_context
def knowledge(ctx: click.Context, scope: str | None, global_: bool) -> None:
    """Index, search, read and grep external documents (files and URLs)."""
    ctx.obj = group_scope(scope, global_)


def _knowledge(ctx: click.Context, session_id: str = CLI_SESSION) -> Knowledge:
    return open_knowledge(command_scope(ctx), session_id, Path.cwd())


@knowledge.command("index")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--force", is_flag=True, help="Re-embed even when the content is unchanged.")
@FORMAT_OPTION
@click.pass_context
def index_cmd(ctx: click.Context, sources: tuple[str, ...], force: bool, fmt: str) -> None:
    """Index files or URLs, one after another (each re-indexed only when its content changed).
    A folder's documents are named by the shell: `octobrain knowledge index docs/*.md`. Given
    several, one that fails is named on stderr and the others are still indexed (exit 2, or 1
    when a server could not answer), what was indexed then said on stderr too: a failed
    command leaves stdout empty; `--format json` prints a list."""
    from octobrain.errors import InvalidInput
    from octobrain.knowledge.render import render_index, to_dict
    from octobrain.knowledge.sources import ONE_FILE, refuse_directory

    for source in sources:  # before anything is embedded: a folder is a mistake, not a source
        glob = f"name its files (octobrain knowledge index {source.rstrip('/')}/*.md)"
        refuse_directory(source, ONE_FILE if "://" in source else glob, Path.cwd())
    k = _knowledge(ctx)
    reports, failed = [], []
    indexed: list[str] = []  # the sources indexed, for a Ctrl-C to name
    for at, source in enumerate(sources):
        try:
            with progress_of_total(f"embedding chunks of {source}") as progress:
                report = k.index(source, global_=k.scope == "", force=force, progress=progress)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM (`launch`): say where
            _interrupted(k, source, indexed, sources[at + 1 :])
            raise
        except InvalidInput as exc:
            if len(sources) == 1:
                raise
            failed.append(exc)
            (UserError if exc.input_fault else UserFailure)(str(exc)).show()
            continue
        reports.append(report)
        indexed.append(source)
    # Said once all are done: a failure after them leaves stdout empty, as every failed
    # command does (before, the sources indexed were printed, then the error, exit 2).
    if failed:
        for report in reports:
            click.echo(printable(render_index(report)), err=True)
        error = UserFailure if any(not e.input_fault for e in failed) else UserError
        raise error(
            f"source: {len(failed)} of {len(sources)} sources not indexed (named above); "
            "the others are"
        )
    if fmt == "json":
        data = [to_dict(r) for r in reports]
        emit_json(data[0] if len(sources) == 1 else data)
    else:
        click.echo(on_terminal("\n".join(render_index(r) for r in reports)))


def _interrupted(k: Knowledge, source: str, indexed: list[str], left: tuple[str, ...]) -> None:
    """What a Ctrl-C during `index` of `source` leaves, on stderr before `Aborted!`. New chunks
    become visible only with the source row's switch to them (`knowledge.store`): cut before
    it, the source keeps what it had; cut after it (its old chunks being dropped, its report
    being made), it stands, and is said to."""
    stands = False
    with suppress(Exception):  # (the store unreadable now: the switch is not known to be made)
        stands = k.switched(source)
    if stands:
        cut = f"interrupted: after {source} was indexed (it stands)"
        indexed = [*indexed, source]
    else:
        cut = (
            f"interrupted: {source} not indexed (nothing of it kept: an earlier index of it, if "
            "any, stands)"
        )
    lines = [cut, "indexed: " + (", ".join(indexed) or "none")]
    if left:
        lines.append("not reached: " + ", ".join(left))
    with suppress(OSError, ValueError):  # (stderr gone: the exit code still says it)
        click.echo(printable("\n".join(lines)), err=True)


@knowledge.command("search")
@click.argument("query")
@click.option("--source", help="Search only this file or URL (indexed first if needed).")
@click.option(
    "-l", "--limit", type=int, default=None, help="Results (default: knowledge.max_results, 5)."
)
@click.option(
    "--min-relevance",
    type=float,
    default=None,
    help="Relevance floor, 0–1 (default: knowledge.min_relevance, 0.3).",
)
@SESSION_OPTION
@FORMAT_OPTION
@click.pass_context
def search_cmd(
    ctx: click.Context,
    query: str,
    source: str | None,
    limit: int | None,
    min_relevance: float | None,
    session_id: str,
    fmt: str,
) -> None:
    """Hybrid (BM25 + vector) search over indexed documents."""
    from octobrain.knowledge.render import render_search

    k = _knowledge(ctx, session_id)
    with _source_option():
        result = k.search(query, source=source, limit=limit, min_relevance=min_relevance)
    _emit(fmt, result, render_search(result))


@knowledge.command("read")
@click.argument("source")
@click.option(
    "--from-line",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="First line to print (line numbers as `match` prints them).",
)
@click.option(
    "--from-byte",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Where in --from-line to start, in bytes (what a page that cut a long line names).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Print one page: whole lines up to this many bytes, then where the next starts "
    "(default: the whole text).",
)
@FORMAT_OPTION
@click.pass_context
def read_cmd(
    ctx: click.Context,
    source: str,
    from_line: int,
    from_byte: int,
    max_bytes: int | None,
    fmt: str,
) -> None:
    """Print the extracted text of a file or URL (without indexing it): all of it, or a page."""
    from octobrain.knowledge.pages import page
    from octobrain.knowledge.render import CLI_PAGING, render_read

    shown = page(_knowledge(ctx).read(source), from_line, max_bytes, from_byte)
    _emit(fmt, shown, render_read(shown, CLI_PAGING))


@knowledge.command("match")
@click.argument("pattern")
@click.option("--source", help="Only this file or URL, as it reads now (not indexed).")
@click.option("-i", "--ignore-case", is_flag=True, help="Match letters in either case.")
@click.option(
    "-m",
    "--max-matches",
    type=int,
    default=None,
    help="Cap on lines shown (default: knowledge.max_matches, 100).",
)
@click.option("-C", "--context", type=int, default=0, show_default=True, help="Lines around.")
@SESSION_OPTION
@FORMAT_OPTION
@click.pass_context
def match_cmd(
    ctx: click.Context,
    pattern: str,
    source: str | None,
    ignore_case: bool,
    max_matches: int | None,
    context: int,
    session_id: str,
    fmt: str,
) -> None:
    """Grep indexed documents with a regular expression (linear time, capped)."""
    from octobrain.knowledge.render import render_match

    with _source_option():
        report = _knowledge(ctx, session_id).match(
            pattern,
            source=source,
            ignore_case=ignore_case,
            max_matches=max_matches,
            context=context,
        )
    _emit(fmt, report, render_match(report))


@knowledge.command("store")
@click.argument("key")
@click.argument("content")
@SESSION_OPTION
@FORMAT_OPTION
@click.pass_context
def store_cmd(ctx: click.Context, key: str, content: str, session_id: str, fmt: str) -> None:
    """Keep CONTENT as the session note stored://KEY ("-" reads it from stdin)."""
    from octobrain.knowledge.render import render_store

    if content == "-":
        content = sys.stdin.read()
    note = _knowledge(ctx, session_id).store(key, content)
    _emit(fmt, note, render_store(note))


@knowledge.command("delete")
@click.argument("key")
@SESSION_OPTION
@FORMAT_OPTION
@click.pass_context
def delete_cmd(ctx: click.Context, key: str, session_id: str, fmt: str) -> None:
    """Delete the session note stored://KEY."""
    from octobrain.knowledge.render import render_delete

    uri = _knowledge(ctx, session_id).delete(key)
    _emit(fmt, {"deleted": uri}, render_delete(key))


@knowledge.command("delete-source")
@click.argument("source")
@FORMAT_OPTION
@click.pass_context
def delete_source_cmd(ctx: click.Context, source: str, fmt: str) -> None:
    """Remove an indexed file or URL and all its chunks."""
    info = _knowledge(ctx).delete_source(source)
    chunks = f"{info.chunk_count} chunk{'s' * (info.chunk_count != 1)}"
    _emit(fmt, {"deleted": info.uri, "chunks": info.chunk_count}, f"Deleted {info.uri} ({chunks})")


@knowledge.command("list")
@click.option(
    "-l", "--limit", type=int, default=20, show_default=True, help="Sources shown (1–100000)."
)
@FORMAT_OPTION
@click.pass_context
def list_cmd(ctx: click.Context, limit: int, fmt: str) -> None:
    """Indexed sources, most recently checked first."""
    from octobrain.knowledge.render import render_sources

    sources = _knowledge(ctx).list_sources(limit)
    _emit(fmt, sources, render_sources(sources))


@knowledge.command("stats")
@FORMAT_OPTION
@click.pass_context
def stats_cmd(ctx: click.Context, fmt: str) -> None:
    """Counts of sources, chunks and notes visible here."""
    from octobrain.knowledge.render import render_stats

    stats = _knowledge(ctx).stats()
    _emit(fmt, stats, render_stats(stats))
    if stats.damaged:  # counted, then said as `memory stats` says it: one line, exit 1
        from octobrain.store.schema import SOURCES

        raise counted_damaged((SOURCES, stats.damaged_ids, stats.damaged, None))


# Every knowledge command reads or writes what one scope sees: `--scope` / `--global` work after
# the subcommand too (`knowledge search foo --global`).
add_scope_options(knowledge)
