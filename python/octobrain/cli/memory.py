"""`octobrain memory …`: the memory engine from a terminal. Thin: parse, call `Brain`, format."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from octobrain.cli.common import (
    FORMAT_OPTION,
    OctobrainGroup,
    add_scope_options,
    chosen_scope,
    command_scope,
    open_brain,
    plural,
    scope_options,
)
from octobrain.errors import InvalidInput

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain


def _split(values: Sequence[str]) -> list[str]:
    """`--tags a,b --tags c` → [a, b, c]."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _emit(fmt: str, data: Any, text: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(text)


@click.group("memory", cls=OctobrainGroup)
@scope_options
@click.pass_context
def memory(ctx: click.Context, scope: str | None, global_: bool) -> None:
    """Store, search and curate memories."""
    ctx.obj = {"scope": chosen_scope(scope, global_)}


def _brain(ctx: click.Context, *, lazy_sleep: bool = True) -> Brain:
    from octobrain.memory.sleep_startup import start_background_sleep

    scope = command_scope(ctx)
    brain = open_brain(scope, Path.cwd())
    if lazy_sleep:  # a due sleep pass runs in the background; it never fails this command
        start_background_sleep(brain)
    return brain


@memory.command("memorize")
@click.option("-t", "--title", required=True, help="Short title (5–200 bytes).")
@click.option("-c", "--content", required=True, help="The memory itself (10–10000 bytes).")
@click.option("-m", "--memory-type", default=None, help="Type, e.g. decision, bug_fix, goal.")
@click.option("-i", "--importance", type=float, default=None, help="0–1 (default 0.5).")
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
    """Store a memory; prints what was stored (`--format json`: its id)."""
    from octobrain.memory.render import format_stored

    links: list[dict[str, Any]] = []
    for spec in related_to:
        target, _, kind = spec.partition(":")
        links.append({"target_id": target, "relationship_type": kind or "related_to"})
    links += [{"target_id": t, "relationship_type": "supersedes"} for t in supersedes]
    mem, edges = _brain(ctx).memorize(
        title,
        content,
        memory_type=memory_type,
        importance=importance,
        tags=_split(tags),
        related_files=_split(files),
        source=source,
        related_to=links,
    )
    _emit(
        fmt,
        {"id": mem.id, "scope": mem.scope, "relationships": len(edges)},
        format_stored(mem, edges),
    )


@memory.command("remember")
@click.argument("queries", nargs=-1, required=True)
@click.option("-m", "--memory-types", multiple=True, help="Only these types (repeatable).")
@click.option("--tags", multiple=True, help="Only memories with any of these tags.")
@click.option("--files", multiple=True, help="Only memories about any of these files.")
@click.option("--after", "created_after", help="Created at or after (ISO-8601 or YYYY-MM-DD).")
@click.option("--before", "created_before", help="Created before (a bare date includes it).")
@click.option("--min-relevance", type=float, default=None, help="0–1 calibrated relevance.")
@click.option("-l", "--limit", type=int, default=None, help="Results (default 5, max 50).")
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

    brain = _brain(ctx)
    recall = brain.remember(
        list(queries) if len(queries) > 1 else queries[0],
        memory_types=_split(memory_types) or None,
        tags=_split(tags),
        related_files=_split(files),
        created_after=created_after,
        created_before=created_before,
        min_relevance=min_relevance,
        limit=limit,
        include_archived=include_archived,
    )
    _emit(fmt, recall_to_dict(recall), format_recall(recall))
    brain.flush()  # count the accesses now the answer is out, not in an exit hook


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
    from octobrain.memory.render import UNDO_NOTE, memory_to_dict

    brain = _brain(ctx)
    if bool(memory_ids) == bool(query):
        raise InvalidInput("memory_ids", "give memory ids or --query, not both and not neither")
    if query:
        targets = brain.forget_preview(
            query, memory_types=_split(memory_types) or None, tags=_split(tags)
        )
    else:
        targets = [brain.get(mid) for mid in memory_ids]
    if not targets:
        _emit(fmt, {"deleted": 0, "memories": []}, "Nothing matches; nothing deleted.")
        return
    if fmt == "text":
        click.echo(f"Will delete {plural(len(targets), 'memory', 'memories')}:")
        for m in targets:
            click.echo(f"  {m.id}  {m.title}")
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput("--yes", "required to delete without a terminal to confirm on")
        click.confirm("Delete them?", abort=True)
    deleted = brain.forget([m.id for m in targets], confirm=True)
    _emit(
        fmt,
        {"deleted": deleted, "memories": [memory_to_dict(m) for m in targets]},
        f"Deleted {plural(deleted, 'memory', 'memories')}; {UNDO_NOTE}.",
    )


@memory.command("update")
@click.argument("memory_id")
@click.option("-t", "--title")
@click.option("-c", "--content")
@click.option("-m", "--memory-type")
@click.option("-i", "--importance", type=float)
@click.option("--add-tags", multiple=True)
@click.option("--remove-tags", multiple=True)
@click.option("--add-files", multiple=True)
@click.option("--remove-files", multiple=True)
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
    fmt: str,
) -> None:
    """Edit a memory in place (its scope never changes)."""
    from octobrain.memory.render import format_memory, memory_to_dict

    mem = _brain(ctx).update(
        memory_id,
        title=title,
        content=content,
        memory_type=memory_type,
        importance=importance,
        add_tags=_split(add_tags),
        remove_tags=_split(remove_tags),
        add_files=_split(add_files),
        remove_files=_split(remove_files),
    )
    _emit(fmt, memory_to_dict(mem), format_memory(mem))


@memory.command("get")
@click.argument("memory_id")
@FORMAT_OPTION
@click.pass_context
def get_cmd(ctx: click.Context, memory_id: str, fmt: str) -> None:
    """Show one memory."""
    from octobrain.memory.render import format_memory, memory_to_dict

    mem = _brain(ctx).get(memory_id)
    _emit(fmt, memory_to_dict(mem), format_memory(mem))


@memory.command("recent")
@click.option("-l", "--limit", type=int, default=20, show_default=True)
@click.option("-m", "--memory-type", default=None)
@FORMAT_OPTION
@click.pass_context
def recent_cmd(ctx: click.Context, limit: int, memory_type: str | None, fmt: str) -> None:
    """The newest memories (listing does not count as access)."""
    from octobrain.memory.render import memory_to_dict

    mems = _brain(ctx).recent(limit, memory_type)
    text = "\n".join(
        f"{m.created_at:%Y-%m-%d %H:%M}  {m.id}  {m.source.label} [{m.memory_type.value}] {m.title}"
        for m in mems
    )
    _emit(fmt, [memory_to_dict(m) for m in mems], text or "No memories yet.")


@memory.command("stats")
@FORMAT_OPTION
@click.pass_context
def stats_cmd(ctx: click.Context, fmt: str) -> None:
    """Counts by scope, type, state and trust tier."""
    stats = _brain(ctx).stats()
    lines = []
    for key, value in stats.items():
        if isinstance(value, dict):
            lines.append(
                f"{key}: " + (", ".join(f"{k or '(global)'} {v}" for k, v in value.items()) or "-")
            )
        else:
            lines.append(f"{key}: {value if value != '' else '(global)'}")
    _emit(fmt, stats, "\n".join(lines))


@memory.command("relate")
@click.argument("source_id")
@click.argument("target_id")
@click.option("-t", "--relationship-type", default="related_to", show_default=True)
@click.option("-s", "--strength", type=float, default=0.8, show_default=True)
@click.option("-d", "--description", default="")
@FORMAT_OPTION
@click.pass_context
def relate_cmd(
    ctx: click.Context,
    source_id: str,
    target_id: str,
    relationship_type: str,
    strength: float,
    description: str,
    fmt: str,
) -> None:
    """Link two memories: SOURCE --type--> TARGET."""
    from octobrain.memory.render import relationship_to_dict

    rel = _brain(ctx).relate(
        source_id, target_id, relationship_type, strength=strength, description=description
    )
    _emit(
        fmt,
        relationship_to_dict(rel),
        f"{rel.source_id} {rel.relationship_type.value} {rel.target_id}",
    )


@memory.command("graph")
@click.argument("memory_id")
@click.option("-d", "--depth", type=int, default=2, show_default=True)
@FORMAT_OPTION
@click.pass_context
def graph_cmd(ctx: click.Context, memory_id: str, depth: int, fmt: str) -> None:
    """Memories linked to MEMORY_ID, up to DEPTH edges away."""
    from octobrain.memory.render import memory_to_dict, relationship_to_dict

    mems, rels = _brain(ctx).graph(memory_id, depth)
    titles = {m.id: m.title for m in mems}
    text = "\n".join(
        f"{titles[r.source_id]}  --{r.relationship_type.value}-->  {titles[r.target_id]}"
        for r in rels
    )
    data = {
        "memories": [memory_to_dict(m) for m in mems],
        "relationships": [relationship_to_dict(r) for r in rels],
    }
    _emit(fmt, data, text or "No relationships.")


@memory.command("export")
@click.argument("output", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.option("--embeddings", is_flag=True, help="Include embedding vectors.")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.pass_context
def export_cmd(ctx: click.Context, output: str, embeddings: bool, force: bool) -> None:
    """Write visible memories and their links as JSONL (to OUTPUT or stdout)."""
    from octobrain.memory.transfer import export_jsonl

    if output != "-" and Path(output).exists() and not force:
        raise InvalidInput("output", f"{output} already exists; pass --force to overwrite it")
    brain = _brain(ctx)
    if output == "-":
        export_jsonl(brain, sys.stdout, embeddings=embeddings)
        return
    with open(output, "w", encoding="utf-8") as out:
        total = brain.store.count()
        label = f"exporting up to {plural(total, 'memory', 'memories')} to {output}"
        with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
            n = export_jsonl(brain, out, embeddings=embeddings, progress=bar.update)
    click.echo(f"exported {plural(n, 'memory', 'memories')} to {output}", err=True)


@memory.command("import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@FORMAT_OPTION
@click.pass_context
def import_cmd(ctx: click.Context, source: str, fmt: str) -> None:
    """Import a JSONL export (ids already present are skipped)."""
    from octobrain.memory.transfer import import_jsonl

    brain = _brain(ctx)
    handle = sys.stdin if source == "-" else open(source, encoding="utf-8")  # noqa: SIM115
    try:
        lines = handle.readlines()
    finally:
        if handle is not sys.stdin:
            handle.close()
    label = f"importing {plural(len(lines), 'line', 'lines')} from {source}"
    with click.progressbar(length=len(lines), label=label, file=sys.stderr) as bar:
        report = import_jsonl(brain, lines, progress=bar.update)
    _emit(
        fmt,
        report.__dict__,
        f"imported {plural(report.imported, 'memory', 'memories')}, skipped "
        f"{report.skipped_existing} already present, "
        f"{plural(report.relationships, 'relationship', 'relationships')}, "
        f"{report.reembedded} re-embedded",
    )


@memory.command("reembed")
@click.pass_context
def reembed_cmd(ctx: click.Context) -> None:
    """Re-embed every memory with the configured model (after changing embedding.model)."""
    from octobrain.memory.transfer import reembed

    brain = _brain(ctx)
    model = brain.embedder.model_id
    total = brain.store.open_memories_unchecked().count_rows()
    with click.progressbar(
        length=total, label=f"re-embedding with {model}", file=sys.stderr
    ) as bar:
        n = reembed(brain, progress=bar.update)
    click.echo(f"re-embedded {plural(n, 'memory', 'memories')} with {model}")


@memory.command("sleep-consolidate")
@click.option("--threshold", type=float, default=None, help="Cosine similarity (default 0.85).")
@click.option("--min-size", type=int, default=None, help="Smallest cluster merged (default 3).")
@click.option("--max-age-days", type=float, default=None, help="Only newer memories (default 7).")
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

    report = _brain(ctx, lazy_sleep=False).sleep_consolidate(
        threshold=threshold, min_size=min_size, max_age_days=max_age_days, dry_run=dry_run
    )
    verb = "would merge" if dry_run else "merged"
    lines = [
        f"{report.candidates} recent working memories in scope {report.scope or '(global)'}; "
        f"{verb} {plural(len(report.consolidations), 'cluster', 'clusters')}"
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
    data = {
        "scope": report.scope,
        "dry_run": dry_run,
        "candidates": report.candidates,
        "consolidations": [consolidation_to_dict(c) for c in report.consolidations],
        "skipped": report.skipped,
        "archived": report.archived,
        "conflicts": [
            {"prevails": c.winner, "outranked": c.loser, "reason": c.reason}
            for c in report.conflicts
        ],
        "disagreements": [list(pair) for pair in report.disagreements],
    }
    _emit(fmt, data, "\n\n".join(lines))


@memory.command("consolidate")
@click.argument("goal_id")
@FORMAT_OPTION
@click.pass_context
def consolidate_cmd(ctx: click.Context, goal_id: str, fmt: str) -> None:
    """Close GOAL_ID: consolidate the memories that achieve it under its closing memory."""
    from octobrain.memory.render import consolidation_to_dict, format_consolidation

    done = _brain(ctx, lazy_sleep=False).consolidate_goal(goal_id)
    _emit(fmt, consolidation_to_dict(done), format_consolidation(done))


@memory.command("unconsolidate")
@click.argument("parent_id")
@FORMAT_OPTION
@click.pass_context
def unconsolidate_cmd(ctx: click.Context, parent_id: str, fmt: str) -> None:
    """Undo a consolidation: restore its members exactly, remove a synthesised parent."""
    undone = _brain(ctx, lazy_sleep=False).unconsolidate(parent_id)
    text = f"restored {plural(len(undone.restored), 'memory', 'memories')}" + (
        f"; removed the synthesised parent {undone.parent_id}" if undone.parent_removed else ""
    )
    _emit(fmt, undone.__dict__, text)


@memory.command("history")
@click.option("-l", "--limit", type=int, default=20, show_default=True)
@FORMAT_OPTION
@click.pass_context
def history_cmd(ctx: click.Context, limit: int, fmt: str) -> None:
    """The store's kept versions (a week of every write), newest first."""
    versions = _brain(ctx, lazy_sleep=False).history(limit)
    rows = [
        {"version": v.version, "timestamp": v.timestamp.isoformat(), "memories": v.rows}
        for v in versions
    ]
    text = "\n".join(
        f"{v.version:>6}  {v.timestamp:%Y-%m-%d %H:%M:%S} UTC  "
        + plural(v.rows, "memory", "memories")
        for v in versions
    )
    _emit(fmt, rows, text or "No versions.")


@memory.command("restore")
@click.argument("version", type=int)
@click.option("-y", "--yes", is_flag=True, help="Restore without asking.")
@click.pass_context
def restore_cmd(ctx: click.Context, version: int, yes: bool) -> None:
    """Return the whole store (all scopes) to VERSION; the restore itself can be undone."""
    brain = _brain(ctx, lazy_sleep=False)
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput("--yes", "required to restore without a terminal to confirm on")
        click.confirm(f"Restore every scope of {brain.uri} to version {version}?", abort=True)
    now = brain.restore(version, confirm=True)
    click.echo(
        f"restored version {version}: now version {now.version} with "
        f"{plural(now.rows, 'memory', 'memories')}"
    )


add_scope_options(memory)
