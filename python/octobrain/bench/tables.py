"""Markdown tables for `octobrain bench beir|scale`, and rewriting them into the README."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput

__all__ = ["beir_table", "check_readme", "replace_between", "scale_table", "update_readme"]


def _split(path: Path, start: str, end: str) -> tuple[str, str]:
    """`path`'s text up to the line `start` and from the line `end` on. Each marker must be a
    line of its own (one quoted in prose or a table is not one), there once, `start` first:
    with a pair twice, the second kept its stale table; with `end` before `start`, the text
    between them was not the table's."""
    from octobrain.files import TooLarge, named_by, read_regular

    with named_by("update", path, "is a directory, not a README"):
        try:
            data = read_regular(path, _MAX_README)[0]
        except TooLarge:
            raise InvalidInput("update", f"{path} is over {_MAX_README >> 20} MiB") from None
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("update", f"{path} is not UTF-8 text") from None
    lines = content.splitlines(keepends=True)
    at = {m: [i for i, line in enumerate(lines) if line.strip() == m] for m in (start, end)}
    if not (at[start] and at[end]):
        raise InvalidInput(
            "update", f"{path} has no {start} … {end} markers (each on a line of its own)"
        )
    twice = [m for m in (start, end) if len(at[m]) > 1]
    if twice:
        raise InvalidInput(
            "update",
            f"{path} has {twice[0]} on {len(at[twice[0]])} lines; keep one pair of markers",
        )
    first, last = at[start][0], at[end][0]
    if last < first:
        raise InvalidInput("update", f"{path} has {end} before {start}; put the table between")
    return "".join(lines[: first + 1]), "".join(lines[last:])


_MAX_README = 64 << 20  # (a README is text: a bound keeps a wrong path from filling memory)


def replace_between(path: Path, start: str, end: str, text: str) -> None:
    """Rewrite the lines of `path` between two marker lines (see `_split`) with `text`,
    atomically: a new file moved over it (through a symlink to its target), so a failed or
    interrupted write leaves the old README whole."""
    from octobrain.files import write_atomic_file

    head, tail = _split(path, start, end)
    if not head.endswith("\n"):
        head += "\n"
    write_atomic_file(path, f"{head}{text}\n{tail}", "update")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def check_readme(path: Path, name: str) -> None:
    """Refuse, before a benchmark runs, a README `update_readme` could not rewrite."""
    _split(path, *_markers(name))


def update_readme(path: Path, name: str, text: str) -> None:
    """Replace the block between `<!-- {name}:start -->` and `<!-- {name}:end -->`."""
    replace_between(path, *_markers(name), text)


def beir_table(report: dict[str, Any]) -> str:
    """The ablation table of one `bench beir` report, with its ingest and resource facts."""
    lines = [
        f"`{report['dataset']}` via the {report['path']} path: {report['docs']:,} documents, "
        f"{report['queries']} queries, model `{report['model']}`, {report['machine']}.",
        "",
        "| mode | nDCG@10 | Recall@10 | Recall@100 | MRR@10 | search p50 | search p95 |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in report["modes"]:
        name = f"**{m['mode']}**" if m["mode"] == "default" else m["mode"]
        lines.append(
            f"| {name} | {m['ndcg_at_10']:.3f} | {m['recall_at_10']:.3f} | "
            f"{m['recall_at_100']:.3f} | {m['mrr_at_10']:.3f} | "
            f"{m['search_p50_ms']:.1f} ms | {m['search_p95_ms']:.1f} ms |"
        )
    embedded = (
        f"{report['embedded']:,} embedded, {report['cached']:,} from the embedding cache"
        if report["cached"]
        else f"{report['embedded']:,} embedded"
    )
    lines += [
        "",
        f"Ingest: {report['ingest_seconds']:.1f} s for {report['rows']:,} rows "
        f"({report['docs_per_second']:.0f} docs/s; {embedded}); first search (mirror build) "
        f"{report['mirror_seconds'] * 1000:.0f} ms; query embedding p50 "
        f"{report['query_embedding_p50_ms']:.1f} ms (add it to the search latency for a cold "
        f"query); peak RSS {report['peak_rss_mb']:.0f} MiB.",
    ]
    return "\n".join(lines)


def _or_dash(value: Any, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


def scale_table(report: dict[str, Any]) -> str:
    """The table of one `bench scale` report (— where a size was not measured that way)."""
    lines = [
        f"Model for the stored vectors: `{report['model']}`; {report['machine']}. "
        f"{report['notes']}",
        "",
        "| memories | memorize (1 by 1) | import (batch) | remember p50 | remember p95 | "
        "remember p50, filtered | + query embedding p50 | sleep pass | store on disk | "
        "cold start, no snapshot | RSS, first process | cold start, snapshot | "
        "remember p50, fresh process | RSS serving it | ANN recall@10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["sizes"]:
        get = r.get
        bulk = get("bulk_import_per_s")
        imported = f"{bulk:,.0f}/s (bulk)" if bulk else _or_dash(get("import_per_s"), ",.0f", "/s")
        lines.append(
            f"| {r['memories']:,} | {_or_dash(get('memorize_per_s'), '.0f', '/s')} | "
            f"{imported} | {_or_dash(get('remember_p50_ms'), '.1f', ' ms')} | "
            f"{_or_dash(get('remember_p95_ms'), '.1f', ' ms')} | "
            f"{_or_dash(get('remember_filtered_p50_ms'), '.1f', ' ms')} | "
            f"{r['query_embedding_p50_ms']:.1f} ms | "
            f"{_or_dash(get('sleep_seconds'), '.2f', ' s')} | {r['store_mb']:.1f} MB | "
            f"{_or_dash(get('cold_start_build_ms'), '.0f', ' ms')} | "
            f"{_or_dash(get('build_rss_mb'), '.0f', ' MiB')} | "
            f"{r['cold_start_ms']:.0f} ms | "
            f"{_or_dash(get('served_remember_p50_ms'), '.1f', ' ms')} | "
            f"{r['serving_rss_mb']:.0f} MiB | {_or_dash(get('ann_recall_at_10'), '.3f')} |"
        )
    return "\n".join(lines)
