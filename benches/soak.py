"""The reliability soak: the fast CI suite's scenarios, many more times, with figures.

    .venv/bin/python benches/soak.py --json benches/results/soak.json --update README.md

Bounded in count and time (loopback only, hash embedder, temp stores): mixed CLI + stdio + HTTP
writers on one store, an HTTP load run (calls/s, p95), random SIGKILLs of memorize, sleep
consolidation, knowledge re-index and re-embed, and hostile-input fuzzing. Any lost or
resurrected write, dangling edge, half-done consolidation or mixed generation is a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from octobrain.bench.tables import update_readme
from octobrain.store import seen

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.reliability import kills  # noqa: E402
from tests.reliability.load import Plan, http_load, run_mixed, verify  # noqa: E402

from report import check_update  # noqa: E402

# Its CLI writers are processes of their own, as in tests/reliability (`tests/conftest.py`): with
# the resident service on, one served them and outlived the run (its data directory deleted)
# for `service.idle_seconds`, one a round.
os.environ["OCTOBRAIN_SERVICE_ENABLED"] = "0"


def mixed(rounds: int, plan: Plan) -> dict[str, Any]:
    totals = {"rounds": 0, "writes": 0, "deletes": 0, "links": 0, "tag_updates": 0, "ops": 0,
              "cross_reads": 0, "problems": 0}  # fmt: skip
    for _ in range(rounds):
        # (The marks of its stores, left by this process and its children, go with it.)
        with seen.scratch("octobrain-soak-") as tmp:
            ledger = run_mixed(Path(tmp) / "data", Path(tmp), plan)
            problems = ledger.errors + verify(Path(tmp) / "data", ledger)
        totals["rounds"] += 1
        totals["writes"] += len(ledger.written)
        totals["deletes"] += len(ledger.deleted)
        totals["links"] += len(ledger.links)
        totals["tag_updates"] += len(ledger.tags)
        totals["ops"] += ledger.ops
        totals["cross_reads"] += ledger.seen_others
        totals["problems"] += len(problems)
        for p in problems[:5]:
            print(f"  PROBLEM: {p}", file=sys.stderr)
    return totals


def killing(per_op: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    with seen.scratch("octobrain-soak-") as tmp:
        uri = Path(tmp) / "mem"
        before = {kills.brain_at(uri).memorize("Earlier note", "Written before the kills.")[0].id}
        problems = 0
        for _ in range(per_op):
            acked, _ = kills.kill_randomly(uri, "memorize", rng, window_s=0.3)
            problems += len(kills.check_memorize(uri, acked, before))
            before |= set(acked)
        out["memorize"] = {"kills": per_op, "acknowledged": len(before) - 1, "problems": problems}
    out["sleep"] = _repeat(per_op, rng, _kill_sleep)
    out["reindex"] = _repeat(per_op, rng, _kill_reindex)
    out["reembed"] = _repeat(per_op, rng, _kill_reembed)
    return out


def _repeat(n: int, rng: random.Random, one: Any) -> dict[str, int]:
    problems = finished = 0
    for _ in range(n):
        with seen.scratch("octobrain-soak-") as tmp:
            p, done = one(Path(tmp), rng)
            problems += p
            finished += done
    return {"kills": n, "finished_before_kill": finished, "problems": problems}


def _kill_sleep(tmp: Path, rng: random.Random) -> tuple[int, bool]:
    from tests.test_consolidation import twins
    from tests.test_consolidation_crash import assert_consistent, assert_no_dangling

    uri = tmp / "db"
    members = twins(kills.brain_at(uri))
    _, done = kills.kill_randomly(uri, "sleep", rng, window_s=1.5)
    try:
        fresh = kills.brain_at(uri)
        assert_consistent(fresh, members)
        fresh.sleep_consolidate()
        assert assert_consistent(fresh, members) == "consolidated"
        assert_no_dangling(fresh)
    except AssertionError as exc:
        print(f"  PROBLEM (sleep): {exc}", file=sys.stderr)
        return 1, done
    return 0, done


def _kill_reindex(tmp: Path, rng: random.Random) -> tuple[int, bool]:
    uri, doc = tmp / "db", tmp / "guide.md"
    kills.knowledge_at(uri).index(str(kills.guide(doc, "bluegreen")))
    kills.guide(doc, "rainbow")
    _, done = kills.kill_randomly(uri, "reindex", rng, window_s=1.5, extra=(str(doc),))
    generation, problems = kills.check_reindex(uri, 60)
    for p in problems:
        print(f"  PROBLEM (reindex): {p}", file=sys.stderr)
    return len(problems) + (done and generation != "new"), done


def _kill_reembed(tmp: Path, rng: random.Random) -> tuple[int, bool]:
    uri = tmp / "db"
    brain = kills.brain_at(uri)
    ids = {brain.memorize(f"Fact {i}", f"Fact number {i} to re-embed.")[0].id for i in range(8)}
    _, done = kills.kill_randomly(uri, "reembed", rng, model="hash:32", window_s=1.0)
    model, problems = kills.check_reembed(uri, ids)
    for p in problems:
        print(f"  PROBLEM (reembed): {p}", file=sys.stderr)
    return len(problems) + (done and model != "hash:32"), done


def fuzz(examples: int) -> dict[str, Any]:
    env = {**os.environ, "OCTOBRAIN_FUZZ_EXAMPLES": str(examples)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/reliability/test_fuzz.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    tests = 6  # 4 tools + filter escape + CLI
    return {
        "cases": examples * tests,
        "passed": done.returncode == 0,
        "seconds": round(time.perf_counter() - start, 1),
        "tail": done.stdout.strip().splitlines()[-1:] if done.stdout else [],
    }


def render(r: dict[str, Any]) -> str:
    m, h, k, f = r["mixed"], r["http"], r["kills"], r["fuzz"]
    kill_rows = "\n".join(
        f"| SIGKILL during {name} | {v['kills']} | {v['problems']} |" for name, v in k.items()
    )
    return "\n".join([
        f"Soak run: `{r['command']}` ({r['seconds']:.0f} s on {os.cpu_count()} cores, "
        "hash embedder, loopback only).",
        "",
        "| scenario | count | problems |",
        "|---|---:|---:|",
        f"| mixed rounds: {r['plan']['cli_workers']} CLI + {r['plan']['stdio_workers']} stdio + "
        f"{r['plan']['http_workers']} HTTP writers on one store | {m['rounds']} rounds, "
        f"{m['ops']} operations | {m['problems']} |",
        f"| acknowledged writes / deletes / links / concurrent tag edits kept | {m['writes']} / "
        f"{m['deletes']} / {m['links']} / {m['tag_updates']} | {m['problems']} |",
        f"| reads of another process's write | {m['cross_reads']} | {m['problems']} |",
        kill_rows,
        f"| fuzzed tool calls and CLI invocations (hypothesis) | {f['cases']} | "
        f"{0 if f['passed'] else 'FAILED'} |",
        "",
        f"HTTP under load: {h['clients']} concurrent MCP clients, {h['calls']} tool calls "
        f"(1 memorize : 2 remember): **{h['calls_per_s']} calls/s**, p50 {h['p50_ms']} ms, "
        f"**p95 {h['p95_ms']} ms**, {h['errors']} errors.",
    ])  # fmt: skip


def command_line(ap: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command that repeats the run: the table's counts follow the options set away from
    their defaults (where its output went, `--json` and `--update`, changes none of them)."""
    words = ["python", "benches/soak.py"]
    for name in ("rounds", "kills", "fuzz", "clients", "requests", "budget", "seed"):
        if getattr(args, name) != ap.get_default(name):
            words += [f"--{name}", f"{getattr(args, name):g}"]
    return shlex.join(words)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="mixed-writer rounds")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILLs per operation")
    ap.add_argument("--fuzz", type=int, default=300, help="hypothesis examples per fuzz test")
    ap.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients")
    ap.add_argument("--requests", type=int, default=30, help="tool calls per HTTP client")
    ap.add_argument("--budget", type=float, default=300, help="HTTP load time cap (s)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--update", type=Path, help="rewrite the soak block of this README")
    return ap


def main() -> int:
    ap = parser()
    args = ap.parse_args()
    check_update(ap, args.update, "soak")
    plan = Plan(cli_workers=3, cli_ops=6, stdio_workers=2, http_workers=3, mcp_ops=15)
    start = time.perf_counter()
    report: dict[str, Any] = {"command": command_line(ap, args), "plan": plan.__dict__}
    print("mixed writers …", file=sys.stderr)
    report["mixed"] = mixed(args.rounds, plan)
    print("HTTP load …", file=sys.stderr)
    with seen.scratch("octobrain-soak-") as tmp:
        report["http"] = http_load(
            Path(tmp) / "data", Path(tmp), args.clients, args.requests, args.budget
        )
    print("kills …", file=sys.stderr)
    report["kills"] = killing(args.kills, args.seed)
    print("fuzz …", file=sys.stderr)
    report["fuzz"] = fuzz(args.fuzz)
    report["seconds"] = time.perf_counter() - start
    text = render(report)
    print(json.dumps(report, indent=2))
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.update:
        update_readme(args.update, "soak", text)
    bad = report["mixed"]["problems"] + report["http"]["errors"]
    bad += sum(v["problems"] for v in report["kills"].values()) + (not report["fuzz"]["passed"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
