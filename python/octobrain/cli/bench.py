"""`octobrain bench …`: retrieval quality and speed, measured through the product's own code."""

from __future__ import annotations

import json
from pathlib import Path

import click

from octobrain.bench.variant_names import VARIANTS
from octobrain.cli.bench_options import (
    CACHE_DIR_OPTION,
    OUTPUT_OPTION,
    model_option,
    update_option,
)
from octobrain.cli.common import FORMAT_OPTION, OctobrainGroup, emit_json
from octobrain.cli.progress import progress_bar

SCIFACT = Path("../shared/data/scifact")
SCIFACT_OPTION = click.option(
    "--data",
    "data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="OCTOBRAIN_SCIFACT",
    default=SCIFACT,
    show_default=True,
    help="BEIR dataset directory (corpus, queries, qrels/test.tsv), or $OCTOBRAIN_SCIFACT.",
)
SPLIT_OPTION = click.option(
    "--split",
    default=None,
    help="The judgments read, qrels/<split>.tsv. Default: test, else the only split there.",
)


def _dataset(data: Path) -> None:
    """Refuse a dataset directory that is not there, naming how to give another."""
    if not data.is_dir():
        raise click.UsageError(
            f"--data: {data} is not a directory; pass --data DIR or set OCTOBRAIN_SCIFACT"
        )


@click.group(cls=OctobrainGroup)
def bench() -> None:
    """Measure quality and speed: BEIR retrieval, LoCoMo conversations, scale, cold start."""


@bench.command("bm25")
@SCIFACT_OPTION
@SPLIT_OPTION
@click.option("--k1", type=float, default=1.2, show_default=True, help="BM25 k1 (>= 0).")
@click.option("--b", "b", type=float, default=0.75, show_default=True, help="BM25 b (0..1).")
@click.option("--stem/--no-stem", default=True, show_default=True, help="Snowball stemming.")
@click.option("--stopwords/--no-stopwords", default=True, show_default=True, help="Drop stopwords.")
@FORMAT_OPTION
def bench_bm25_command(
    data: Path, split: str | None, k1: float, b: float, stem: bool, stopwords: bool, fmt: str
) -> None:
    """BM25 on a BEIR dataset: nDCG@10, Recall@10/100, MRR@10, build time, query latency."""
    _dataset(data)
    # Heavy imports stay inside the command so `octobrain --help` stays fast.
    from octobrain.bench.datasets import load_beir
    from octobrain.bench.kernel import bench_bm25
    from octobrain.errors import InvalidInput
    from octobrain.kernels.bm25 import BM25Index

    try:
        BM25Index(k1=k1, b=b)  # validate the parameters before any slow work
    except ValueError as err:
        name, _, rule = str(err).partition(": ")
        raise click.BadParameter(rule, param_hint=f"--{name}") from err
    try:
        dataset = load_beir(data, split)
        with progress_bar(len(dataset.query_ids), "queries") as bar:
            result = bench_bm25(
                dataset, k1=k1, b=b, stem=stem, stopwords=stopwords, on_query=lambda: bar.update(1)
            )
    except InvalidInput as err:
        raise click.BadParameter(err.rule, param_hint=f"--{err.field}") from err
    if fmt == "json":
        emit_json(result.as_dict())
        return
    click.echo(f"dataset      {data} ({result.docs} docs, {result.queries} queries)")
    click.echo(f"params       k1={result.k1} b={result.b} stem={stem} stopwords={stopwords}")
    click.echo(f"nDCG@10      {result.ndcg_at_10:.4f}")
    click.echo(f"Recall@10    {result.recall_at_10:.4f}")
    click.echo(f"Recall@100   {result.recall_at_100:.4f}")
    click.echo(f"MRR@10       {result.mrr_at_10:.4f}")
    click.echo(f"build        {result.build_seconds * 1000:.1f} ms")
    click.echo(f"query p50    {result.query_p50_ms:.3f} ms")
    click.echo(f"query p95    {result.query_p95_ms:.3f} ms")
    click.echo(f"batch        {result.batch_seconds * 1000:.1f} ms for all queries")


def _publish(
    payload: dict[str, object],
    table: str,
    marker: str,
    fmt: str,
    output: Path | None,
    update: Path | None,
) -> None:
    """A bench command's ending: the raw results to --output first, then the README table
    between its markers (--update), each written whole or not at all, then the report itself
    on stdout; a write that fails still prints the report, then ends the command (exit 1)."""
    from octobrain.bench.tables import update_readme
    from octobrain.errors import OctobrainError
    from octobrain.files import write_atomic_file

    failed = None
    try:
        if output is not None:
            write_atomic_file(output, json.dumps(payload, indent=2) + "\n", "output")
        if update is not None:
            update_readme(update, marker, table)
    except OctobrainError as err:  # (a path refused, or a full disk)
        failed = err
    if fmt == "json":
        emit_json(payload)
    else:
        click.echo(table)
    if failed is not None:  # (the options were checked before the run: not the input's fault)
        raise OctobrainError(f"{failed}; the report is on standard output") from None


# The largest store the README's tables were measured at (1M memories: ~4 GB on disk, ~30 s
# first build); a larger size is a typo that would run for hours, or overflow.
MAX_SIZE = 1_000_000


def _sizes(sizes: str, minimum: int) -> list[int]:
    """`--sizes` as store sizes: comma-separated integers in [`minimum`, `MAX_SIZE`], each
    once (a size given twice built and timed the same store twice, one table row each)."""
    try:
        counts = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter("must be comma-separated integers", param_hint="--sizes") from None
    if not counts or any(not minimum <= c <= MAX_SIZE for c in counts):
        raise click.BadParameter(
            f"each size must be between {minimum:,} and {MAX_SIZE:,}", param_hint="--sizes"
        )
    twice = sorted({c for c in counts if counts.count(c) > 1})
    if twice:
        raise click.BadParameter(
            f"each size once; {', '.join(f'{c:,}' for c in twice)} given more than once",
            param_hint="--sizes",
        )
    return counts


@bench.command("beir")
@SCIFACT_OPTION
@SPLIT_OPTION
@click.option(
    "--path",
    "path",
    type=click.Choice(["knowledge", "memory"]),
    default="knowledge",
    show_default=True,
    help="Ingest as knowledge documents or as memories.",
)
@click.option(
    "--modes",
    default="all",
    show_default=True,
    help="Comma-separated retrieval modes, or 'all': bm25, dense, rrf, minmax, zscore (each "
    "also with +hyde: dense+hyde, …) and default (the shipped settings).",
)
@click.option("--max-queries", type=click.IntRange(min=1), help="Evaluate only the first N.")
@model_option("Embedding model string.")
@CACHE_DIR_OPTION
@click.option(
    "--whole-passages",
    is_flag=True,
    help="Knowledge path: one chunk per passage instead of the default chunking (ablation).",
)
@click.option(
    "--bytes-only-chunks",
    is_flag=True,
    help="Knowledge path: cut chunks by bytes alone, not also to the model's window (ablation).",
)
@FORMAT_OPTION
@OUTPUT_OPTION
@update_option("beir", "BEIR table")
def bench_beir_command(
    data: Path,
    split: str | None,
    path: str,
    modes: str,
    max_queries: int | None,
    model: str,
    cache_dir: Path | None,
    whole_passages: bool,
    bytes_only_chunks: bool,
    fmt: str,
    output: Path | None,
    update: Path | None,
) -> None:
    """Quality (nDCG@10, Recall@10/100, MRR@10) and speed of each retrieval mode on a BEIR
    dataset, through the product's knowledge or memory path."""
    _dataset(data)
    from dataclasses import replace

    from octobrain.bench.beir import MODES, run_beir
    from octobrain.bench.datasets import load_beir
    from octobrain.bench.tables import beir_table
    from octobrain.errors import InvalidInput

    if path == "memory":  # memories are stored whole: there is no chunking to change
        for flag, given in (
            ("--whole-passages", whole_passages),
            ("--bytes-only-chunks", bytes_only_chunks),
        ):
            if given:
                raise click.BadParameter(
                    "only applies to --path knowledge (memories are not chunked)", param_hint=flag
                )
    chosen = list(MODES) if modes == "all" else [m.strip() for m in modes.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MODES]
    if unknown or not chosen:
        raise click.BadParameter(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}",
            param_hint="--modes",
        )
    try:
        dataset = load_beir(data, split)
        if max_queries is not None:
            dataset = replace(
                dataset,
                query_ids=dataset.query_ids[:max_queries],
                query_texts=dataset.query_texts[:max_queries],
            )
        with (
            progress_bar(len(dataset.doc_ids), "ingest") as ib,
            progress_bar(len(dataset.query_ids) * len(chosen), "queries") as qb,
        ):
            report = run_beir(
                dataset,
                dataset_name=data.name
                if dataset.split == "test"
                else f"{data.name}, {dataset.split} split",
                path=path,
                modes=chosen,
                model=model,
                cache_dir=cache_dir,
                whole_passages=whole_passages,
                fit_chunks=not bytes_only_chunks,
                on_ingest=lambda done, _total: ib.update(done - ib.pos),
                on_query=lambda _mode, _done, _total: qb.update(1),
            )
    except InvalidInput as err:
        raise click.BadParameter(err.rule, param_hint=f"--{err.field}") from err
    payload = report.as_dict()
    _publish(payload, beir_table(payload), "beir", fmt, output, update)


@bench.command("scale")
@click.option(
    "--sizes",
    default="1000,10000,100000",
    show_default=True,
    help="Comma-separated store sizes (memories in one scope), each 2 to 1,000,000.",
)
@click.option(
    "--queries", type=click.IntRange(min=2), default=200, show_default=True, help="Per size."
)
@model_option("Model whose query-embedding cost is measured and reported beside the search.")
@click.option(
    "--ann-min-rows",
    type=click.IntRange(min=0),
    default=None,
    help="Override search.ann_min_rows in the serving processes (0: always exact).",
)
@click.option(
    "--store-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the bulk-written stores here and reuse them on later runs.",
)
@click.option(
    "--bulk-from",
    type=click.IntRange(min=1),
    default=200_000,
    show_default=True,
    help="Sizes from this one are bulk-written (serving columns only).",
)
@FORMAT_OPTION
@OUTPUT_OPTION
@update_option("scale", "table")
def bench_scale_command(
    sizes: str,
    queries: int,
    model: str,
    ann_min_rows: int | None,
    store_dir: Path | None,
    bulk_from: int,
    fmt: str,
    output: Path | None,
    update: Path | None,
) -> None:
    """Memorize and import throughput, remember p50/p95 (plain and filtered), sleep-pass time,
    store size, cold start and peak RSS at growing store sizes (synthetic memories)."""
    from octobrain.bench.scale import run_scale
    from octobrain.bench.tables import scale_table

    counts = _sizes(sizes, 2)
    report = run_scale(
        counts,
        queries=queries,
        model=model,
        progress=lambda step: click.echo(step, err=True),
        ann_min_rows=ann_min_rows,
        store_dir=store_dir,
        bulk_from=bulk_from,
    )
    _publish(report, scale_table(report), "scale", fmt, output, update)


@bench.command("locomo")
@click.option(
    "--data",
    "data",
    type=click.Path(path_type=Path),
    envvar="OCTOBRAIN_LOCOMO",
    default=Path("../shared/data/locomo-dev"),
    show_default=True,
    help="LoCoMo's file, or a directory holding it (locomo-dev.json.gz, locomo10.json or one"
    " *.json[.gz]), or $OCTOBRAIN_LOCOMO; read, never copied.",
)
@model_option("Embedding model string.")
@CACHE_DIR_OPTION
@click.option(
    "--window",
    type=click.IntRange(min=0, max=5),
    default=None,
    help="Neighbouring turns on each side in a turn's indexed context (default 1; 0: ablation).",
)
@click.option(
    "--topic-words",
    type=click.IntRange(min=0, max=50),
    default=None,
    help="A session's distinctive words in each turn's context (default 0: measured worse).",
)
@click.option(
    "--variant",
    type=click.Choice(VARIANTS),
    default=None,
    help="A mechanism measured against the shipped path (README; none is shipped).",
)
@FORMAT_OPTION
@OUTPUT_OPTION
@update_option("locomo", "LoCoMo table")
def bench_locomo_command(
    data: Path,
    model: str,
    cache_dir: Path | None,
    window: int | None,
    topic_words: int | None,
    variant: str | None,
    fmt: str,
    output: Path | None,
    update: Path | None,
) -> None:
    """Conversation memory on LoCoMo: each conversation ingested turn by turn into its own
    scope, every question asked through `remember`; turn-level nDCG@10, Recall@5/10,
    session-level Recall@5, per category and per half, the adversarial questions' answer rate,
    ingest throughput and search latency."""
    from octobrain.bench.locomo import locomo_table, run_locomo
    from octobrain.bench.locomo_data import load_locomo
    from octobrain.errors import InvalidInput

    try:
        conversations, questions = load_locomo(data)
        turns = sum(len(c.turns) for c in conversations)
        with (
            progress_bar(turns, "ingest") as ib,
            progress_bar(len(questions), "questions") as qb,
        ):
            report = run_locomo(
                data,
                model=model,
                cache_dir=cache_dir,
                window=window,
                topic_words=topic_words,
                variant=variant,
                on_ingest=ib.update,
                on_query=lambda: qb.update(1),
            )
    except InvalidInput as err:
        raise click.BadParameter(err.rule, param_hint=f"--{err.field}") from err
    payload = report.as_dict()
    _publish(payload, locomo_table(payload), "locomo", fmt, output, update)


@bench.command("cold")
@click.option(
    "--sizes",
    default="10000",
    show_default=True,
    help="Comma-separated store sizes (memories), each 1 to 1,000,000.",
)
@click.option(
    "--runs", type=click.IntRange(min=1), default=7, show_default=True, help="Runs per table cell."
)
@model_option("Embedding model of the store.")
@click.option(
    "--commands",
    default="remember,memorize,session-start,pre-compact,session-end,mcp",
    show_default=True,
    help="Which commands to time (comma-separated).",
)
@FORMAT_OPTION
@OUTPUT_OPTION
@update_option("cold", "cold-start table")
def bench_cold_command(
    sizes: str,
    runs: int,
    model: str,
    commands: str,
    fmt: str,
    output: Path | None,
    update: Path | None,
) -> None:
    """Whole-process latency of memory commands, hooks and `octobrain mcp` spawn, with the
    resident service warm, as the first command with none running (it starts one), and with
    it disabled (p50 / p90 of --runs)."""
    from octobrain.bench.cold import COMMANDS, cold_table, run_cold
    from octobrain.errors import InvalidInput, as_json

    counts = _sizes(sizes, 1)
    chosen = [c.strip() for c in commands.split(",") if c.strip()]
    known = (*COMMANDS, "mcp")
    unknown = sorted(set(chosen) - set(known))
    if unknown or not chosen:
        raise InvalidInput(
            "--commands", f"must name some of {', '.join(known)}; got {as_json(commands)}"
        )
    reports = [
        run_cold(
            n,
            runs=runs,
            model=model,
            commands=chosen,
            progress=lambda step: click.echo(step, err=True),
        )
        for n in counts
    ]
    payload: dict[str, object] = {"sizes": reports}
    _publish(payload, cold_table(reports), "cold", fmt, output, update)
