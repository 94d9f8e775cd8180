"""`octobrain bench …`: retrieval quality and speed, measured through the product's own code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from octobrain.cli_common import OctobrainGroup


@click.group(cls=OctobrainGroup)
def bench() -> None:
    """Measure retrieval quality and speed on a BEIR dataset."""


@bench.command("bm25")
@click.option(
    "--data",
    "data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="OCTOBRAIN_SCIFACT",
    help="BEIR dataset directory (corpus, queries, qrels/test.tsv). Default: $OCTOBRAIN_SCIFACT.",
)
@click.option("--k1", type=float, default=1.2, show_default=True, help="BM25 k1 (>= 0).")
@click.option("--b", "b", type=float, default=0.75, show_default=True, help="BM25 b (0..1).")
@click.option("--stem/--no-stem", default=True, show_default=True, help="Snowball stemming.")
@click.option("--stopwords/--no-stopwords", default=True, show_default=True, help="Drop stopwords.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
def bench_bm25_command(
    data: Path | None, k1: float, b: float, stem: bool, stopwords: bool, fmt: str
) -> None:
    """BM25 on a BEIR dataset: nDCG@10, Recall@10/100, MRR@10, build time, query latency."""
    if data is None:
        raise click.UsageError("--data is required (or set OCTOBRAIN_SCIFACT)")
    # Heavy imports stay inside the command so `octobrain --help` stays fast.
    from octobrain.beir import load_beir
    from octobrain.bench import bench_bm25
    from octobrain.bm25 import BM25Index
    from octobrain.errors import InvalidInput

    try:
        BM25Index(k1=k1, b=b)  # validate the parameters before any slow work
    except ValueError as err:
        name, _, rule = str(err).partition(": ")
        raise click.BadParameter(rule, param_hint=f"--{name}") from err
    try:
        dataset = load_beir(data)
        with click.progressbar(
            length=len(dataset.query_ids), label="queries", file=sys.stderr
        ) as bar:
            result = bench_bm25(
                dataset, k1=k1, b=b, stem=stem, stopwords=stopwords, on_query=lambda: bar.update(1)
            )
    except InvalidInput as err:
        raise click.BadParameter(err.rule, param_hint=f"--{err.field}") from err
    if fmt == "json":
        click.echo(json.dumps(result.as_dict(), indent=2))
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
