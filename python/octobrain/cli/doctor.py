"""`octobrain doctor`: check every table of the store and say what would repair it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from octobrain.cli.common import FORMAT_OPTION, emit_json

if TYPE_CHECKING:
    from octobrain.store.doctor_report import Diagnosis
    from octobrain.store.location import StoreLocation


@click.command("doctor")
@click.option(
    "--recreate",
    type=click.Choice(["knowledge", "forgotten_turns", "consolidations"]),
    help="Start these damaged or lost tables over, empty (what they held is lost; the old "
    "directory is moved aside), then check again.",
)
@click.option(
    "--drop-dangling-edges",
    "drop_dangling",
    is_flag=True,
    help="Delete the edges that point at a memory that no longer exists (what a `forget` "
    "killed half-way leaves), then check again.",
)
@click.option(
    "--drop-self-links",
    "drop_self",
    is_flag=True,
    help="Delete the edges that link a memory to itself (what an earlier octobrain made when "
    "two `memory ingest`s of one export ran at once); no other edge, and the memories stay. "
    "Under the store's write lock, then check again.",
)
@click.option(
    "--drop-orphan-chunks",
    "drop_orphans",
    is_flag=True,
    help="Delete the knowledge chunks no source row names (what an index killed between its "
    "two commits leaves), then check again.",
)
@click.option(
    "--drop-temporary-files",
    "drop_temps",
    is_flag=True,
    help="Delete the temporary files over an hour old that LanceDB writes killed half-way "
    "left in the tables' folders (it never removes them), under the store's write locks, "
    "then check again.",
)
@click.option(
    "--forget-damaged",
    "forget_damaged",
    is_flag=True,
    help="Delete every memory that no longer matches its checksum, whatever scope it reads as "
    "(its text is not shown; `octobrain memory restore` can bring back the version before), "
    "with its links, and every consolidation record or forgotten turn that no longer "
    "matches its own (the others are kept), then check again.",
)
@click.option(
    "--abandon-imports",
    "abandon_imports",
    is_flag=True,
    help="Let go of the `memory import`s named as cut short (say, their file is gone): what "
    "they wrote stays as it is, the store's own from then on; a damaged record of them is "
    "cleared. Under the store's write lock, not while an import runs; then check again.",
)
@click.option(
    "--rewrite-manifest",
    "rewrite_manifest",
    is_flag=True,
    help="Write the store's record of its tables (`_octobrain/manifest.json`) again when it "
    "cannot be read: each table that opens, and each another table shows was made; under the "
    "store's write lock, then check again.",
)
@FORMAT_OPTION
def doctor_cmd(
    recreate: str | None,
    drop_dangling: bool,
    drop_self: bool,
    drop_orphans: bool,
    drop_temps: bool,
    forget_damaged: bool,
    abandon_imports: bool,
    rewrite_manifest: bool,
    fmt: str,
) -> None:
    """Open every table, read every fragment, check the manifest and row counts.

    Prints what is wrong and what would repair it; exits 1 when anything is wrong. Changes
    nothing (so it also runs on a read-only copy of a store), unless `--recreate` names
    tables to start over, or `--drop-dangling-edges`, `--drop-self-links`,
    `--drop-orphan-chunks`, `--drop-temporary-files`, `--forget-damaged`, `--abandon-imports` or
    `--rewrite-manifest` is given.
    """
    from octobrain.config import (
        config_path,
        file_said,
        file_state,
        load_config,
        resolve_storage_uri,
    )
    from octobrain.knowledge.store import table_schemas
    from octobrain.store.doctor import diagnose
    from octobrain.store.doctor_tables import JOURNALS
    from octobrain.store.location import StoreLocation
    from octobrain.store.recreate import recreate as start_over

    config = load_config()
    location = StoreLocation.from_config(config, resolve_storage_uri(config))
    schemas = table_schemas()  # (the knowledge tables', held to theirs too)
    if rewrite_manifest:  # (first: every other repair reads the manifest)
        from octobrain.store.manifest_repair import rewrite

        tables = rewrite(location)
        if tables is None:  # (said, as every repair says what it did: here, nothing)
            click.echo("manifest: not damaged, not written again", err=True)
        else:
            click.echo(
                f"manifest: written again, listing {', '.join(tables) or 'no table'}", err=True
            )
    if recreate is not None:
        damaged = {p.table for p in diagnose(location, schemas).problems}
        for moved in start_over(location, recreate, damaged):
            click.echo(f"moved aside: {moved}", err=True)
        click.echo(f"{recreate}: started over, empty", err=True)
    if drop_temps:
        from octobrain.store import leftover_temps

        count, size = leftover_temps.remove(location)
        click.echo(f"{count} temporary file(s) of {size:,} bytes deleted", err=True)
    if abandon_imports:
        _abandon_imports(location)
    if drop_orphans or drop_dangling or drop_self or forget_damaged:
        # One check serves every repair: deleting a damaged memory with its links leaves no
        # dangling edge, dropping dangling edges or self-links changes no memory (each finds
        # its edges again under the lock), and none touches the knowledge tables, which
        # dropping orphan chunks alone changes.
        found = diagnose(location, schemas)
        if drop_orphans:
            dropped = _drop_orphans(location, found)
            click.echo(f"knowledge_chunks: {dropped} orphan chunk(s) deleted", err=True)
        if drop_dangling:
            dropped = _drop_dangling(location, found)
            click.echo(f"relationships: {dropped} dangling edge(s) deleted", err=True)
        if drop_self:
            dropped = _drop_self_links(location, found)
            click.echo(f"relationships: {dropped} self-link(s) deleted", err=True)
        if forget_damaged:
            memory_ids = _forget_damaged(location, found)
            for memory_id in memory_ids:
                click.echo(f"memories: forgot {memory_id} (damaged, not shown)", err=True)
            records = _forget_damaged_records(location, found)
            for table, ids in records.items():
                for record_id in ids:
                    click.echo(
                        f"{table}: forgot record {record_id} (damaged): {JOURNALS[table]}",
                        err=True,
                    )
            forgot = sum(map(len, records.values()))
            click.echo(
                f"{len(memory_ids)} damaged memory(ies) and {forgot} damaged record(s) "
                f"({', '.join(JOURNALS)}) deleted",
                err=True,
            )
    report = diagnose(location, schemas)
    path = config_path()  # (named: one that holds no setting points at the default store)
    if fmt == "json":
        emit_json({"config": {"path": str(path), "state": file_state(path)}, **report.to_dict()})
    else:
        click.echo(f"config: {path}{file_said(path)}")
        click.echo(f"store: {report.store}")
        click.echo(f"manifest: {report.manifest}")
        for t in report.tables:
            if not t.opened:
                click.echo(f"{t.name}: not opened")
                continue
            bad = f", {len(t.damaged_fragments)} damaged fragments" * bool(t.damaged_fragments)
            click.echo(f"{t.name}: {t.rows_read} of {t.rows_counted} rows read{bad}")
            if t.unchecked_deletions:
                n = t.unchecked_deletions
                them = "them" if n > 1 else "it"
                click.echo(
                    f"{t.name}: {n} deletion file{'s' * (n > 1)} with no checksum recorded "
                    "(written by an earlier octobrain, or by a write stopped before it recorded "
                    f"{them}): not checked; the next write to the table records {them}"
                )
        if report.unfinished_consolidations:
            n = report.unfinished_consolidations
            click.echo(
                f"consolidations: {n} left half-way (by a killed process, or a `memory "
                "restore` to a version between a consolidation's commits); searches never see "
                "one half-done, and the next sleep pass (`octobrain memory sleep-consolidate`) "
                f"finishes or undoes {'it' if n == 1 else 'each'}"
            )
        for problem in report.problems:
            click.echo(f"problem: {problem.line()}")
        click.echo("ok: nothing is wrong" if report.ok else f"{len(report.problems)} problem(s)")
    if not report.ok:
        raise SystemExit(1)


def _abandon_imports(location: StoreLocation) -> None:
    """Let go of the imports cut short, and clear a damaged record of them (`import_marks`)."""
    from octobrain.store import import_marks

    marks, damaged = import_marks.abandon(location)
    if damaged is not None:
        click.echo(
            f"imports: cleared the damaged record of imports under way ({damaged})", err=True
        )
    for mark in marks:
        click.echo(
            f"imports: abandoned the `memory import` of {mark.named} ({mark.count:,} "
            f"memories) begun {mark.began}: what it wrote stays",
            err=True,
        )
    click.echo(f"imports: {len(marks)} cut-short import(s) abandoned", err=True)


def _forget_damaged(location: StoreLocation, found: Diagnosis) -> list[str]:
    """Delete the memories `found` says are garbled (`MemoryStore.forget_damaged`); nothing
    is opened (or made) when it names none."""
    from octobrain.store.memories import MemoryStore
    from octobrain.store.schema import embedded_with

    if not any(t.name == "memories" and t.garbled_rows for t in found.tables):
        return []
    # The table exists (its rows were read); opened as the model it was embedded with, which
    # a delete neither uses nor changes (the configured one may differ: `memory reembed`).
    table = MemoryStore(location, model_id="", dim=0).open_memories_unchecked()
    model, dim = embedded_with(table.schema)
    return MemoryStore(location, model_id=model, dim=int(dim)).forget_damaged()


def _forget_damaged_records(location: StoreLocation, found: Diagnosis) -> dict[str, list[str]]:
    """Delete the journal rows `found` says are garbled (`recreate.forget_damaged_records`);
    nothing is opened (or made) when it names none."""
    from octobrain.store.doctor_tables import JOURNALS
    from octobrain.store.memories import MemoryStore
    from octobrain.store.recreate import forget_damaged_records

    if not any(t.name in JOURNALS and t.garbled_rows for t in found.tables):
        return {}
    # (the tables exist: their rows were read; the model is neither checked nor used)
    return forget_damaged_records(MemoryStore(location, model_id="", dim=0))


def _drop_dangling(location: StoreLocation, found: Diagnosis) -> int:
    """Delete the dangling edges `found` names; nothing is opened (or made) when it names
    none, so an absent or damaged store is left as it is (the report names why)."""
    from octobrain.store.memories import MemoryStore

    if not found.dangling_edges:
        return 0
    # The tables exist (their edges were read): the model is neither checked nor used.
    return MemoryStore(location, model_id="", dim=0).drop_dangling_edges()


def _drop_self_links(location: StoreLocation, found: Diagnosis) -> int:
    """Delete the edges from a memory to itself (`MemoryStore.drop_self_links`, which finds
    them again under the write lock); nothing is opened (or made) when `found` names none."""
    from octobrain.store.memories import MemoryStore

    if not found.self_links:
        return 0
    # The tables exist (their edges were read): the model is neither checked nor used.
    return MemoryStore(location, model_id="", dim=0).drop_self_links()


def _drop_orphans(location: StoreLocation, found: Diagnosis) -> int:
    """Delete the chunks no source row names (`KnowledgeStore.drop_orphans`, which finds them
    again under the write lock); nothing is opened (or made) when `found` names none."""
    from octobrain.knowledge.store import KnowledgeStore
    from octobrain.store.schema import CHUNKS, embedded_with

    if not found.orphan_chunks:
        return 0
    # The tables exist (their chunks were read); opened as the model they were embedded with,
    # which a delete neither uses nor changes.
    model, dim = embedded_with(location.connect().open_table(CHUNKS).schema)
    return KnowledgeStore(location, model, int(dim)).drop_orphans()
