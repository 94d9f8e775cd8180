"""`octobrain memory …`: the memory engine from a terminal. Thin: parse, call `Brain`, format."""

from __future__ import annotations

import re
from typing import Any

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    ROLE_OPTION,
    OctobrainGroup,
    add_scope_options,
    cannot_ask,
    command_brain,
    counted_damaged,
    emit,
    group_scope,
    plural,
    scope_options,
    split_values,
    whole_store_refusal,
    yes_required,
)
from octobrain.cli.curate import CURATION_COMMANDS, WHOLE_STORE_COMMANDS
from octobrain.cli.ingest import ingest_cmd
from octobrain.cli.links import LINK_COMMANDS
from octobrain.cli.storage import migrate_cmd
from octobrain.errors import InvalidInput, as_json
from octobrain.models import MemoryType
from octobrain.safe_text import glimpse, on_terminal, printable


@click.group("memory", cls=OctobrainGroup)
@scope_options
@ROLE_OPTION
@click.pass_context
def memory(ctx: click.Context, scope: str | None, global_: bool, role: str) -> None:
    """Store, search and curate memories."""
    command = ctx.invoked_subcommand
    if (scope is not None or global_) and command is not None and command in WHOLE_STORE:
        raise whole_store_refusal("--global" if global_ else "--scope", command)
    if role and command is not None and command in WHOLE_STORE:
        raise whole_store_refusal("--role", command)
    ctx.obj = {**group_scope(scope, global_), "role": role}


@memory.command("memorize")
@click.option("-t", "--title", required=True, help="Short title (5–200 bytes).")
@click.option("-c", "--content", required=True, help="The memory itself (10–10000 bytes).")
@click.option(
    "-m",
    "--memory-type",
    default=None,
    help=f"One of {', '.join(t.value for t in MemoryType)} (default: code, as the original's).",
)
@click.option(
    "-i",
    "--importance",
    type=float,
    default=None,
    help="0–1 (default: memory.default_importance, 0.5).",
)
@click.option("--tags", multiple=True, help="Comma-separated tags (repeatable).")
@click.option("--files", multiple=True, help="Comma-separated related files (repeatable).")
@click.option(
    "--source",
    type=click.Choice(["user_confirmed", "agent_inferred"]),
    default="user_confirmed",
    show_default=True,
    help="Who vouches for it: a person typing a fact states it (MCP agents default to "
    "agent_inferred).",
)
@click.option("--related-to", multiple=True, metavar="ID[:TYPE]", help="Link to a memory.")
@click.option("--supersedes", multiple=True, metavar="ID", help="This replaces memory ID.")
@FORMAT_OPTION
@click.pass_context
def memorize_cmd(
    ctx: click.Context,
    title: str,
    content: str,
    memory_type: str | None,
    importance: float | None,
    tags: tuple[str, ...],
    files: tuple[str, ...],
    source: str,
    related_to: tuple[str, ...],
    supersedes: tuple[str, ...],
    fmt: str,
) -> None:
    """Store a memory; prints what was stored (`--format json`: its id). The same type, title
    and content as a memory of the scope is not stored again: that memory is the answer."""
    from octobrain.memory.render import format_stored, relationship_to_dict
    from octobrain.times import iso_z

    links: list[dict[str, Any]] = []
    for spec in related_to:
        target, colon, kind = spec.partition(":")
        if colon and not kind.strip():  # `ID:` meant some type, not the default one
            raise InvalidInput(
                "--related-to",
                f"must be ID or ID:TYPE, a type after the colon; got {as_json(spec)}",
            )
        links.append({"target_id": target, "relationship_type": kind or "related_to"})
    links += [{"target_id": t, "relationship_type": "supersedes"} for t in supersedes]
    brain = command_brain(ctx)
    try:
        stored = brain.memorize(
            title,
            content,
            memory_type=memory_type,
            importance=importance,
            tags=split_values(tags),
            related_files=split_values(files),
            source=source,
            related_to=links,
        )
    except InvalidInput as err:
        raise _named_as_given(err, len(related_to)) from None
    mem, edges = stored
    left = brain.findings_left(edges)
    already = stored.already
    data: dict[str, Any] = {
        "id": mem.id,
        "scope": mem.scope,
        "relationships": len(edges),
        "findings_left": left,
        "already_stored": None  # (the memory was stored by this call)
        if already is None
        else {
            "stored_at": iso_z(already.stored_at),
            "added": list(already.added),
            "left_out": list(already.left_out),
            "settled": [relationship_to_dict(e) for e in already.settled],
        },
    }
    emit(fmt, data, format_stored(mem, edges, left, already))


def _named_as_given(err: InvalidInput, related: int) -> InvalidInput:
    """A refusal of a link the command made from `--supersedes` (they follow the `related`
    `--related-to` links) names that option, not `related_to[i].target_id`."""
    found = re.fullmatch(r"related_to\[(\d+)\](?:\.target_id)?", err.field)
    if found is None or int(found.group(1)) < related:
        return err
    return InvalidInput(f"supersedes[{int(found.group(1)) - related}]", err.rule)


_TIME_OPTIONS = {"created_after": "--after", "created_before": "--before"}


def _time_options_named(err: InvalidInput) -> InvalidInput:
    """A refused time bound named by the option given (`--after`), not the field it sets."""
    if err.field not in _TIME_OPTIONS:
        return err
    # Renamed in the rule's words only: the value quoted after "got" is the user's, as given.
    words, given, value = err.rule.partition(", got ")
    words = re.sub("|".join(_TIME_OPTIONS), lambda m: _TIME_OPTIONS[m[0]], words)
    return InvalidInput(_TIME_OPTIONS[err.field], words + given + value)


@memory.command("remember")
@click.argument("queries", nargs=-1, required=True)
@click.option("-m", "--memory-types", multiple=True, help="Only these types (repeatable).")
@click.option("--tags", multiple=True, help="Only memories with any of these tags.")
@click.option("--files", multiple=True, help="Only memories about any of these files.")
@click.option("--after", "created_after", help="Created at or after (ISO-8601 or YYYY-MM-DD).")
@click.option("--before", "created_before", help="Created before (a bare date includes it).")
@click.option(
    "--min-relevance",
    type=float,
    default=None,
    help="0–1 calibrated relevance (default: search.min_relevance, 0.3).",
)
@click.option(
    "-l",
    "--limit",
    type=int,
    default=None,
    help="Results (default: search.default_limit, 5; at most search.max_results, 50).",
)
@click.option("--include-archived", is_flag=True, help="Search archived memories too.")
@FORMAT_OPTION
@click.pass_context
def remember_cmd(
    ctx: click.Context,
    queries: tuple[str, ...],
    memory_types: tuple[str, ...],
    tags: tuple[str, ...],
    files: tuple[str, ...],
    created_after: str | None,
    created_before: str | None,
    min_relevance: float | None,
    limit: int | None,
    include_archived: bool,
    fmt: str,
) -> None:
    """Find memories by meaning and exact words (1–5 queries are fused)."""
    from octobrain.memory.render import format_recall, recall_to_dict

    brain = command_brain(ctx)
    try:
        recall = brain.remember(
            list(queries) if len(queries) > 1 else queries[0],
            memory_types=split_values(memory_types, "memory_types") or None,
            tags=split_values(tags, "tags"),
            related_files=split_values(files, "files"),
            created_after=created_after,
            created_before=created_before,
            min_relevance=min_relevance,
            limit=limit,
            include_archived=include_archived,
        )
    except InvalidInput as err:
        raise _time_options_named(err) from None
    emit(fmt, recall_to_dict(recall), format_recall(recall))
    brain.flush(keep=True)  # the accesses counted now the answer is out (`memory.access`)


@memory.command("forget")
@click.argument("memory_ids", nargs=-1)
@click.option("-q", "--query", help="Forget what this query finds (previewed first).")
@click.option("-m", "--memory-types", multiple=True, help="Query mode: only these types.")
@click.option("--tags", multiple=True, help="Query mode: only memories with these tags.")
@click.option("-y", "--yes", is_flag=True, help="Delete without asking.")
@FORMAT_OPTION
@click.pass_context
def forget_cmd(
    ctx: click.Context,
    memory_ids: tuple[str, ...],
    query: str | None,
    memory_types: tuple[str, ...],
    tags: tuple[str, ...],
    yes: bool,
    fmt: str,
) -> None:
    """Delete memories (by id or unique id prefix, or by query after a preview).

    They are gone from every search at once; `octobrain memory restore` can bring the store back
    to a version before the delete while that version is kept (`octobrain memory history`).
    """
    from octobrain.memory.query import parse_queries
    from octobrain.memory.render import memory_to_dict, released_lines, undo_line
    from octobrain.store.schema import DAMAGED_TITLE

    # An empty --query is a bad query, not "no query"; the query filters never widen or narrow
    # a forget by id, so they are refused rather than silently ignored.
    if query is not None:
        parse_queries(query)
        if memory_ids:
            raise InvalidInput("memory_ids", "give memory ids or --query, not both")
    elif not memory_ids:
        raise InvalidInput("memory_ids", "give memory ids or --query")
    elif tags or memory_types:
        field = "tags" if tags else "memory_types"
        raise InvalidInput(field, "only with --query; ids name exactly what to delete")
    types_given = split_values(memory_types, "memory_types") or None  # (before the store opens)
    tags_given = split_values(tags, "tags")
    brain = command_brain(ctx)
    damaged: set[str] = set()
    if query is not None:
        targets = brain.forget_preview(query, memory_types=types_given, tags=tags_given)
    else:
        targets, damaged = brain.forget_targets(memory_ids)
    if not targets:
        emit(fmt, {"deleted": 0, "memories": []}, "Nothing matches; nothing deleted.")
        return
    # The preview: part of the text answer; with JSON, shown on stderr before the question
    # only (before, a person asked at a terminal confirmed without seeing what would go).
    # Refused for want of a terminal, it goes to stderr too: a failed command's stdout is empty.
    refused = cannot_ask(yes)
    if fmt == "text" or not yes:
        preview = [f"Will delete {plural(len(targets), 'memory', 'memories')}:"]
        for m in targets:
            shown = f"{printable(m.title)}: {glimpse(m.content)}"
            preview.append(f"  {m.id}  {DAMAGED_TITLE if m.id in damaged else shown}")
        click.echo(on_terminal("\n".join(preview)), err=fmt != "text" or refused)
    if not yes:
        if refused:
            raise yes_required("delete")
        # (The question on stderr: stdout is the answer's.) A person declining is no error.
        if not click.confirm("Delete them?", err=True):
            emit(fmt, {"deleted": 0, "memories": []}, "Nothing deleted.")
            return
    forgotten = brain.forget([m.id for m in targets], confirm=True)
    emit(
        fmt,
        {
            "deleted": forgotten.deleted,
            "memories": [
                {"id": m.id, "damaged": True} if m.id in damaged else memory_to_dict(m)
                for m in targets
            ],
            "restored": forgotten.restored,
            "rewritten": forgotten.rewritten,
            "kept": forgotten.kept,
            "undo_version": forgotten.undo_version,
        },
        "\n".join(
            [
                undo_line(forgotten.deleted, forgotten.undo_version),
                *released_lines(forgotten),
            ]
        ),
    )


@memory.command("update")
@click.argument("memory_id")
@click.option("-t", "--title", help="New title (5–200 bytes).")
@click.option("-c", "--content", help="New content (10–10000 bytes; the memory is re-embedded).")
@click.option("-m", "--memory-type", help="New type (as `memorize -m`).")
@click.option("-i", "--importance", type=float, help="New importance, 0–1.")
@click.option("--add-tags", multiple=True, help="Comma-separated tags to add (repeatable).")
@click.option("--remove-tags", multiple=True, help="Comma-separated tags to remove (repeatable).")
@click.option("--add-files", multiple=True, help="Comma-separated related files to add.")
@click.option("--remove-files", multiple=True, help="Comma-separated related files to remove.")
@click.option(
    "--source",
    type=click.Choice(["user_confirmed", "agent_inferred"]),
    default=None,
    help="Who vouches for it now (default: user_confirmed when the title or content is "
    "rewritten, as `memorize` stores what a person types; else as it was).",
)
@FORMAT_OPTION
@click.pass_context
def update_cmd(
    ctx: click.Context,
    memory_id: str,
    title: str | None,
    content: str | None,
    memory_type: str | None,
    importance: float | None,
    add_tags: tuple[str, ...],
    remove_tags: tuple[str, ...],
    add_files: tuple[str, ...],
    remove_files: tuple[str, ...],
    source: str | None,
    fmt: str,
) -> None:
    """Edit a memory in place (its scope never changes). Words a person rewrites are theirs:
    an [INFERRED] memory whose title or content is given becomes [CONFIRMED]."""
    from octobrain.memory.render import edited_lines, format_memory, memory_to_dict

    done = command_brain(ctx).edit(
        memory_id,
        title=title,
        content=content,
        memory_type=memory_type,
        importance=importance,
        add_tags=split_values(add_tags),
        remove_tags=split_values(remove_tags),
        add_files=split_values(add_files),
        remove_files=split_values(remove_files),
        source=source or ("user_confirmed" if title is not None or content is not None else None),
    )
    emit(
        fmt,
        {
            **memory_to_dict(done.memory),
            "merged_rewritten": done.rewritten,
            "merged_kept": done.kept,
        },
        "\n".join(
            [f"Memory updated: {done.memory.id}", format_memory(done.memory), *edited_lines(done)]
        ),
    )


@memory.command("get")
@click.argument("memory_id")
@FORMAT_OPTION
@click.pass_context
def get_cmd(ctx: click.Context, memory_id: str, fmt: str) -> None:
    """Show one memory."""
    from octobrain.memory.render import format_memory, memory_to_dict

    mem = command_brain(ctx).show(memory_id)
    emit(fmt, memory_to_dict(mem), format_memory(mem))


@memory.command("recent")
@click.option("-l", "--limit", type=int, default=20, show_default=True, help="How many (1–10000).")
@click.option("-m", "--memory-type", default=None, help="Only memories of this type.")
@FORMAT_OPTION
@click.pass_context
def recent_cmd(ctx: click.Context, limit: int, memory_type: str | None, fmt: str) -> None:
    """The newest memories (listing does not count as access)."""
    from octobrain.memory.render import memory_to_dict

    mems = command_brain(ctx).recent(limit, memory_type)
    text = "\n".join(
        f"{m.created_at:%Y-%m-%d %H:%M}  {m.id}  {m.source.label} [{m.memory_type.value}] {m.title}"
        for m in mems
    )
    empty = f"No {memory_type} memories in this scope." if memory_type else "No memories yet."
    emit(fmt, [memory_to_dict(m) for m in mems], text or empty)


@memory.command("stats")
@FORMAT_OPTION
@click.pass_context
def stats_cmd(ctx: click.Context, fmt: str) -> None:
    """Counts by scope, role, type, state and trust tier; damaged memories and links."""
    stats = command_brain(ctx).stats()
    lines = []
    for key, value in stats.items():
        if key in ("damaged_ids", "damaged_link_ids"):
            continue
        blank = "(no role)" if key in ("role", "by_role") else "(global)"  # what "" names
        if isinstance(value, dict):
            lines.append(
                f"{key}: " + (", ".join(f"{k or blank} {v}" for k, v in value.items()) or "-")
            )
        else:
            lines.append(f"{key}: {value if value != '' else blank}")
    emit(fmt, stats, "\n".join(lines))
    # Counted, then said as `get`, `recent` and `remember` say it: one line, exit 1.
    found = []
    for table, key, ids, where in (
        ("memories", "damaged", "damaged_ids", None),
        ("relationships", "damaged_links", "damaged_link_ids", "as damaged_links"),
    ):
        count, listed = stats[key], stats[ids]
        if isinstance(count, int) and count and isinstance(listed, list):
            found.append((table, [str(i) for i in listed], count, where))
    if found:
        raise counted_damaged(*found)


for _command in (*LINK_COMMANDS, *CURATION_COMMANDS, ingest_cmd, migrate_cmd):
    memory.add_command(_command)
# Commands on the whole store, every scope: `--scope` / `--global` are refused with them, before
# or after the subcommand, rather than ignored.
WHOLE_STORE = {c.name for c in (*WHOLE_STORE_COMMANDS, migrate_cmd)}
add_scope_options(memory, whole_store=(*WHOLE_STORE_COMMANDS, migrate_cmd))
