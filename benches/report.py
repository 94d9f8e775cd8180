"""Turn a pytest-benchmark JSON file into the README's results table.

Every benchmark declares `benchmark.group` (the task) and `extra_info["impl"]` ("octobrain" or the
baseline's name). For each group this prints the median of each implementation and the speed-up
of octobrain over each baseline, measured side by side in the same run. Extra numeric facts
(nDCG@10, recall) are shown next to the implementation that produced them.

Usage: python benches/report.py RESULTS.json [--update README.md]
"""

from __future__ import annotations

import argparse
import json
import platform
from collections import defaultdict
from pathlib import Path
from typing import Any

from octobrain.bench.tables import check_readme, replace_between, update_readme
from octobrain.errors import InvalidInput
from octobrain.files import write_atomic_file

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _facts(extra: dict[str, Any]) -> str:
    parts = [
        f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
        for k, v in extra.items()
        if k != "impl"
    ]
    return ", ".join(parts)


def table(results: dict[str, Any]) -> str:
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for bench in results["benchmarks"]:
        impl = bench.get("extra_info", {}).get("impl", bench["name"])
        groups[bench.get("group") or bench["name"]][impl] = bench
    machine = results.get("machine_info", {})
    cpu = machine.get("cpu", {}).get("brand_raw") or platform.processor() or "this machine"
    python = (
        machine.get("python_implementation", "CPython") + " " + machine.get("python_version", "")
    )
    lines = [
        f"Measured on {cpu} ({python}), {results.get('datetime', '')[:10]}."
        " Medians; speed-up = baseline median / octobrain median.",
        "",
        "| task | octobrain (median) | baseline | baseline (median) | speed-up | notes |",
        "|---|---|---|---|---|---|",
    ]
    for group in sorted(groups):
        impls = groups[group]
        ours = impls.get("octobrain")
        if ours is None:  # variants of our own code compared with each other
            cells = "; ".join(
                f"{name} {_fmt_time(b['stats']['median'])}" for name, b in sorted(impls.items())
            )
            lines.append(f"| {group} | {cells} | — | — | — | |")
            continue
        for name, other in sorted(impls.items()):
            if name == "octobrain":
                continue
            ratio = other["stats"]["median"] / ours["stats"]["median"]
            notes = "; ".join(
                f"{label}: {facts}"
                for label, facts in (
                    ("ours", _facts(ours.get("extra_info", {}))),
                    (name, _facts(other.get("extra_info", {}))),
                )
                if facts
            )
            lines.append(
                f"| {group} | {_fmt_time(ours['stats']['median'])} | {name} | "
                f"{_fmt_time(other['stats']['median'])} | {ratio:.2f}× | {notes} |"
            )
        if len(impls) == 1:
            lines.append(
                f"| {group} | {_fmt_time(ours['stats']['median'])} | — | — | — | "
                f"{_facts(ours.get('extra_info', {}))} |"
            )
    return "\n".join(lines)


def check_update(parser: argparse.ArgumentParser, readme: Path | None, marker: str) -> None:
    """Refuse at once, before anything is measured, a README (`--update`) whose `marker`
    table could not be rewritten: it was found only once the run was done."""
    if readme is not None:
        try:
            check_readme(readme, marker)
        except InvalidInput as err:
            parser.error(str(err))


def publish(
    table: str, results: object, marker: str, readme: Path | None, json_path: Path | None
) -> None:
    """Print a bench script's table; put it between `<!-- marker:start/end -->` in `readme`
    and its raw results in `json_path`, when given, each written whole or not at all."""
    print(table)
    if json_path:  # first: a README without the markers must not cost a finished run
        write_atomic_file(json_path, json.dumps(results, indent=2), "json")
    if readme:
        update_readme(readme, marker, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--update", type=Path, help="rewrite the table between the bench markers")
    args = parser.parse_args()
    check_update(parser, args.update, "bench")
    rendered = table(json.loads(args.results.read_text()))
    print(rendered)
    if args.update:
        replace_between(args.update, START, END, rendered)


if __name__ == "__main__":
    main()
