"""What the sleep pass's conflict check costs on a flood of values of one setting.

A scope holds `--rows` recent memories worded alike ("The billing service request timeout is
N seconds.", N different in each), all agent-inferred: every pair conflicts, and every one is
a disagreement. Each run is a fresh process making a dry-run pass (`sleep_consolidate(
dry_run=True)`); it reports the process's CPU seconds, those spent in the conflict check, and
its peak RSS. `--src` names other source trees (a worktree of an older commit, its
`python/` dir holding `_core.abi3.so`) to run beside this one, alternating. `--passes N`
then makes N real passes in a row, each a fresh process, and reports how many rows each left
no pass had checked (`unchecked`): a burst over one pass's budget is covered pass by pass.
`--days-apart D` runs pass k with its clock k·D days on, as the lazy pass a day does, on a
copy of the store per source tree; the last line counts the rows no pass ever checked (the
7-day window lets a deep burst go).

    python benches/sleep_conflicts.py --rows 21500 --runs 3
    python benches/sleep_conflicts.py --rows 21500 --runs 3 --src /tmp/old/python
    python benches/sleep_conflicts.py --rows 21500 --runs 0 --passes 43
    python benches/sleep_conflicts.py --rows 8000 --runs 0 --passes 18 --days-apart 1 \
        --src /tmp/old/python
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from child_env import child_env

MODEL = "hash:64"  # restatements keep cosine ~0.9 with it, above the 0.85 threshold
SCOPE = "bench/conflicts"
HERE = Path(__file__).resolve().parent.parent / "python"

_CHILD = """
import json, resource, sys, time
from datetime import timedelta
from pathlib import Path
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory import conflicts, curation
try:  # (a tree before the split keeps the check in memory.sleep)
    from octobrain.memory import sleep_conflicts as holder
    name = "of_pass"
except ImportError:
    from octobrain.memory import sleep as holder
    name = "_conflicts"
from octobrain.memory.brain import Brain

embedder = get_embedder(sys.argv[3])
brain = Brain(sys.argv[2], config=Config(), embedder=embedder, uri=Path(sys.argv[1]))
check = getattr(holder, name)
spent = []
def timed(*args, **kwargs):
    start = time.process_time()
    try:
        return check(*args, **kwargs)
    finally:
        spent.append(time.process_time() - start)
setattr(holder, name, timed)
clock = curation.utcnow
curation.utcnow = lambda: clock() + timedelta(days=float(sys.argv[5]))
pairs_of = conflicts.conflicting_pairs
checked = []
def seen(recent, pool, threshold, budget=None, order=None):
    pairs, left = pairs_of(recent, pool, threshold, budget, order)
    ranked = [at for at in order if conflicts.numbers(recent[at]["content"])]
    checked.extend(recent[at]["id"] for at in ranked[: len(ranked) - left])
    return pairs, left
conflicts.conflicting_pairs = seen
start = time.process_time()
report = brain.sleep_consolidate(dry_run=sys.argv[4] == "dry")
print(json.dumps({
    "cpu_s": time.process_time() - start,
    "conflict_check_cpu_s": sum(spent),
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "disagreements": len(report.disagreements),
    "unchecked": getattr(report, "unchecked", 0),
    "checked_ids": checked,
}))
"""


def build(db: Path, rows: int) -> None:
    from datetime import timedelta

    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain
    from octobrain.models import Memory
    from octobrain.times import utcnow

    embedder = get_embedder(MODEL)
    brain = Brain(SCOPE, config=Config(), embedder=embedder, uri=db)
    now = utcnow()
    for start in range(0, rows, 2048):
        batch = []
        for i in range(start, min(rows, start + 2048)):
            when = now - timedelta(days=5 * (rows - i) / rows)  # all within the 7-day window
            batch.append(
                Memory(
                    title="Billing timeout",
                    content=f"The billing service request timeout is {1000 + i} seconds.",
                    scope=SCOPE,
                    created_at=when,
                    updated_at=when,
                    last_accessed=when,
                )
            )
        brain.store.add(batch, embedder.embed_documents([m.searchable_text() for m in batch]))
    brain.store.compact()


def measure(src: Path, db: Path, mode: str = "dry", days_on: float = 0.0) -> dict[str, Any]:
    env = child_env(db.parent, MODEL, PYTHONPATH=str(src))  # (not the user's config or service)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(db), SCOPE, MODEL, mode, str(days_on)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=21_500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", type=Path, action="append", default=[])
    parser.add_argument("--passes", type=int, default=0)
    parser.add_argument("--days-apart", type=float, default=0.0)
    args = parser.parse_args()
    from octobrain.store.seen import scratch

    trees = [HERE, *args.src]
    with scratch("octobrain-bench-conflicts-") as tmp:
        db = tmp / "db"
        build(db, args.rows)
        runs: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in trees}
        for _ in range(args.runs):
            for tree in trees:  # alternating, so a busy moment hits every tree alike
                runs[tree].append(measure(tree, db))
        for tree in trees if args.passes else []:  # each tree's passes, on its own copy
            own = tmp / f"passes-{trees.index(tree)}"
            shutil.copytree(db, own)
            ever: set[str] = set()
            for at in range(args.passes):
                result = measure(tree, own, "real", at * args.days_apart)
                ever.update(result.pop("checked_ids"))
                print(json.dumps({"src": str(tree), "pass": at + 1, **result}), flush=True)
            never = args.rows - len(ever)
            print(json.dumps({"src": str(tree), "rows": args.rows, "never_checked": never}))
    for tree in trees if args.runs else []:
        for r in runs[tree]:
            r.pop("checked_ids")
        medians = {key: statistics.median(r[key] for r in runs[tree]) for key in runs[tree][0]}
        print(json.dumps({"src": str(tree), "rows": args.rows, "runs": args.runs, **medians}))


if __name__ == "__main__":
    main()
