"""Recall under noise: does curating memory make recall better as the junk drawer grows?

A seeded generator writes, for each topic (a setting of some service in some project), the
current value plus the noise a long-lived agent memory collects:

- the current value, written when it changed a few days ago: confirmed by the user for half the
  topics, only ever inferred by an agent for the others;
- near-duplicate restatements of it (agents re-memorising it across sessions, small edits);
- a slightly wrong guess (a nearby value) that an agent re-memorised in three sessions;
- the superseded old value: a fact when it was written weeks earlier (same tier, phrased like
  one), read often while it held, plus an agent's restatement of it;
- other projects' topics on the same setting of a same-named service (each setting is shared
  by at least three projects, more as the store grows), with their own values.

Then every topic is asked, in each of three phrasings (a full question, a terse lookup, a
unit-first question), over as many independently seeded stores as it takes to ask
`--min-questions` (3,000) questions per size: ten stores at 1k, one at 10k. A returned
memory counts as correct when it states this topic's current value, belongs to the asking
project, and states no other value of the topic (so a consolidation parent counts only when it
did not merge conflicting values or projects). Reported: precision@1 and nDCG@5 of the correct
answer (only the first correct result gains: a restatement of an answer already shown adds
nothing) for

    (a) the raw store, one shared pool for every project;
    (b) (a) after a sleep consolidation pass;
    (c) (a) with `supersedes` links from each current fact to the two old-value memories (what
        an agent records when it stores a changed value: `memorize` with `supersedes` links);
    (d) (a) with scope isolation: each project has its own scope and asks from it;
    (b)+(d), (c)+(d): each of the other two with isolation (isolation hides what they fix);
    (b+c+d) all three together.

Each mechanism's effect is a paired comparison with its baseline on the same questions
(`noise_stats.py`: questions fixed / broken, cluster-bootstrap 95% CI of the p@1 difference,
sign-test p over settings). In one shared pool the projects sharing a setting ask the very same
question and get the very same ranking, so at most one of them can be answered: the table's
"shared-pool ceiling" row is that bound (settings / topics), whatever curation does. (Earlier
versions asked one phrasing of a 200-topic sample from one store: a mechanism's effect of two
questions could not be told from chance. The data written is unchanged; only more of it is asked.)

    python benches/recall_under_noise.py --sizes 1000 10000 [--seed 7] [--min-questions 3000]
        [--model hash:256] [--diagnose] [--update README.md [--marker noise]]

`--diagnose` prints what ranks first, by kind, in (a) and (b) and in (c)+(d) and (b)+(c)+(d);
`--no-access-boost` is an ablation (access_boost_factor 0) for the diagnosis. Results also
go to benches/results/recall_under_<marker>.json (`--json`).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

from octobrain.config import Config
from octobrain.embed.base import Embedder
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.store import seen

sys.path.insert(0, str(Path(__file__).parent))
from noise_data import NOW, QUESTIONS, Topic, correct, generate
from noise_stats import fmt_p, paired
from report import check_update, publish


@dataclass
class Outcome:
    """One question's answer in one configuration."""

    first: int | None  # rank of the first correct memory in the top 5
    top: str  # id of the memory ranked first ("" when nothing came back)


CONFIGS = [
    ("(a) raw, shared pool", False, False, False),
    ("(b) + sleep consolidation", True, False, False),
    ("(c) + supersedes links", False, True, False),
    ("(d) + scope isolation", False, False, True),
    ("(b)+(d)", True, False, True),
    ("(c)+(d)", False, True, True),
    ("(b)+(c)+(d)", True, True, True),
]
# (mechanism, baseline): each mechanism against the configuration it is added to.
PAIRS = [
    ("(b) + sleep consolidation", "(a) raw, shared pool"),
    ("(c) + supersedes links", "(a) raw, shared pool"),
    ("(d) + scope isolation", "(a) raw, shared pool"),
    ("(b)+(d)", "(d) + scope isolation"),
    ("(c)+(d)", "(d) + scope isolation"),
    ("(b)+(c)+(d)", "(c)+(d)"),
    ("(b)+(c)+(d)", "(a) raw, shared pool"),
]


@dataclass
class Run:
    """Every configuration's outcomes over one seeded store, questions in one fixed order."""

    topics: list[Topic]
    questions: list[tuple[Topic, str]]
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    parents: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # config -> members


def run(size: int, embedder: Embedder, seed: int, config: Config) -> Run:
    """Build each configuration's store from one seeded generation and ask every question."""
    with repeatable(seed):
        return _run(size, embedder, seed, config)


def _run(size: int, embedder: Embedder, seed: int, config: Config) -> Run:
    topics, rows = generate(size, seed)
    questions = [
        (t, q.format(setting=t.setting, svc=t.svc, unit=t.unit)) for t in topics for q in QUESTIONS
    ]
    result = Run(topics, questions)
    vectors = embedder.embed_documents([m.searchable_text() for m, _ in rows])
    for name, consolidate, supersede, isolate in CONFIGS:
        t0 = time.perf_counter()
        with seen.scratch("octobrain-noise-") as tmp:  # (no mark of its store left behind)
            pool = "bench/shared-pool"
            memories = [Memory(**{**m.__dict__, "scope": s if isolate else pool}) for m, s in rows]
            scopes = sorted({m.scope for m in memories})
            brains = {s: Brain(s, config=config, embedder=embedder, uri=tmp) for s in scopes}
            first = brains[scopes[0]]
            for start in range(0, len(memories), 2000):
                first.store.add(memories[start : start + 2000], vectors[start : start + 2000])
            if supersede:
                edges = [
                    Relationship(t.fact_id, old, RelationshipType.SUPERSEDES, 1.0, "",
                                 t.project if isolate else pool)
                    for t in topics for old in t.old_ids
                ]  # fmt: skip
                first.store.add_relationships(edges)
            project_of = {m.id: {scope} for m, scope in rows}
            members: dict[str, list[str]] = {}
            if consolidate:
                for brain in brains.values():
                    for c in brain.sleep_consolidate().consolidations:
                        # A parent belongs to its members' project(s); several means a pooled
                        # store merged two projects' memories, which is never a correct answer.
                        members[c.parent.id] = [m.id for m in c.members]
                        project_of[c.parent.id] = set().union(
                            *(project_of[m] for m in members[c.parent.id])
                        )
                mixed = sum(len(project_of[p]) > 1 for p in members)
                print(f"  {len(members)} clusters merged, {mixed} across projects", file=sys.stderr)
            first.store.compact()
            result.parents[name] = members
            outcomes = []
            for t, q in questions:
                brain = brains[t.project if isolate else pool]
                hits = brain.remember(q, limit=5, min_relevance=0.0, record_access=False).hits
                found = (i for i, h in enumerate(hits) if correct(h.memory, t, project_of))
                outcomes.append(Outcome(next(found, None), hits[0].memory.id if hits else ""))
            result.outcomes[name] = outcomes
        p1, ndcg = scores(outcomes)
        took = time.perf_counter() - t0
        print(
            f"{size:>6} seed {seed} {name:<27} p@1 {p1:.3f}  nDCG@5 {ndcg:.3f}  ({took:.0f} s)",
            file=sys.stderr,
        )
    return result


def repeatable(seed: int) -> ExitStack:
    """While open, the clock stands at NOW and every new memory (the store's, the sleep pass's
    parents) takes an id drawn from `seed`, so ties, which search breaks by id, fall the same
    way in every run of the command."""
    rng = random.Random(seed)
    stack = ExitStack()
    stack.enter_context(
        mock.patch("uuid.uuid4", lambda: uuid.UUID(int=rng.getrandbits(128), version=4))
    )
    for where in ("octobrain.memory.curation", "octobrain.memory.reads"):  # sleep pass, search
        stack.enter_context(mock.patch(f"{where}.utcnow", lambda: NOW))
    return stack


def scores(outcomes: list[Outcome]) -> tuple[float, float]:
    """precision@1 and nDCG@5 with one relevant answer per question (ideal DCG = 1)."""
    p1 = sum(o.first == 0 for o in outcomes) / len(outcomes)
    ndcg = sum(0.0 if o.first is None else 1.0 / math.log2(o.first + 2) for o in outcomes)
    return p1, ndcg / len(outcomes)


def kind_of_top(run: Run, config: str, topic: Topic, top: str) -> str:
    """What ranked first for `topic`'s question: whose memory (this project's or another's)
    of which kind (current value, wrong guess, old value), or a consolidation parent of such."""
    if not top:
        return "nothing"
    owners = {t.project: t for t in run.topics if t.svc == topic.svc and t.setting == topic.setting}
    member_ids = run.parents[config].get(top, [top])
    found = {
        (t.project, t.kind_of[m]) for t in owners.values() for m in member_ids if m in t.kind_of
    }
    if not found:
        return "unrelated memory"
    label = " + ".join(sorted(f"{'own' if p == topic.project else 'other'} {k}" for p, k in found))
    if len({p for p, _ in found}) > 1:
        label = "merged projects: " + label
    return ("parent of " if top in run.parents[config] else "") + label


DIAGNOSED = [
    ("(a) raw, shared pool", "(b) + sleep consolidation"),
    ("(c)+(d)", "(b)+(c)+(d)"),
]


def diagnose(runs: list[Run], size: int, a: str, b: str) -> None:
    """Print what ranks first in configurations `a` and `b`, and the questions `b` changed."""
    for config in (a, b):
        kinds = Counter(
            kind_of_top(r, config, t, o.top)
            for r in runs
            for (t, _), o in zip(r.questions, r.outcomes[config], strict=True)
        )
        total = sum(kinds.values())
        print(f"\n{size}: top-1 in {config} ({total} questions)", file=sys.stderr)
        for kind, n in kinds.most_common():
            print(f"  {n:>6} {n / total:6.1%}  {kind}", file=sys.stderr)
        # Curation quality regardless of which project's answer it is (shared-pool ceiling 1).
        current = sum(n for k, n in kinds.items() if k.endswith("current") and "+" not in k)
        print(
            f"  top-1 states some project's current value: {current / total:.1%}", file=sys.stderr
        )
    changes: Counter[str] = Counter()
    for r in runs:
        for (t, _), oa, ob in zip(r.questions, r.outcomes[a], r.outcomes[b], strict=True):
            if (oa.first == 0) != (ob.first == 0):
                verdict = "fixed" if ob.first == 0 else "broken"
                was = kind_of_top(r, a, t, oa.top)
                now = kind_of_top(r, b, t, ob.top)
                changes[f"{verdict}: {was}  ->  {now}"] += 1
    print(f"\n{size}: questions {b} changed against {a}", file=sys.stderr)
    for change, n in changes.most_common(12):
        print(f"  {n:>6}  {change}", file=sys.stderr)


SEED, MIN_QUESTIONS = 7, 3000  # the options' defaults, which the table's command leaves out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--model", default="hash:256")
    parser.add_argument("--seed", type=int, default=SEED, help="first seed; then seed+1, ...")
    parser.add_argument(
        "--min-questions", type=int, default=MIN_QUESTIONS, help="add seeded stores until this many"
    )
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument(
        "--no-access-boost",
        action="store_true",
        help="ablation: memory.access_boost_factor = 0 (how much the old value's reads cost)",
    )
    parser.add_argument("--update", type=Path, help="rewrite the table in this README")
    parser.add_argument("--marker", default="noise", help="README markers <!-- MARKER:start -->")
    parser.add_argument("--json", type=Path, help="default: results/recall_under_<marker>.json")
    args = parser.parse_args()
    check_update(parser, args.update, args.marker)
    results_dir = Path(__file__).parent / "results"
    args.json = args.json or results_dir / f"recall_under_{args.marker.replace('-', '_')}.json"
    embedder = get_embedder(args.model, batch_size=256)
    config = Config()
    if args.no_access_boost:
        config = replace(config, memory=replace(config.memory, access_boost_factor=0.0))
    t0 = time.perf_counter()
    runs: dict[int, list[Run]] = {}
    for n in args.sizes:
        # Independent seeded stores until each size has about the same number of questions,
        # so 1k and 10k are measured with similar power (one 10k store already has 3,333).
        runs[n] = [run(n, embedder, args.seed, config)]
        while sum(len(r.questions) for r in runs[n]) < args.min_questions:
            runs[n].append(run(n, embedder, args.seed + len(runs[n]), config))
    elapsed = time.perf_counter() - t0
    if args.diagnose:
        for n in args.sizes:
            for a, b in DIAGNOSED:
                diagnose(runs[n], n, a, b)
    table, results = report(runs, args)
    results["seconds"] = round(elapsed)
    publish(table, results, args.marker, args.update, args.json)


def _pooled(runs: list[Run], config: str) -> list[Outcome]:
    return [o for r in runs for o in r.outcomes[config]]


def report(runs: dict[int, list[Run]], args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The README tables (scores, then paired effects) and the JSON results."""
    sizes = list(runs)
    results: dict[str, Any] = {
        "model": args.model,
        "first_seed": args.seed,
        "access_boost": not args.no_access_boost,
        "sizes": {},
    }
    score = {n: {c: scores(_pooled(runs[n], c)) for c, *_ in CONFIGS} for n in sizes}
    effects = {}
    for n in sizes:
        # Independent clusters: one setting of one service in one seeded store.
        clusters = [(i, t.svc, t.setting) for i, r in enumerate(runs[n]) for t, _ in r.questions]
        effects[n] = {
            (m, b): paired(
                [o.first == 0 for o in _pooled(runs[n], m)],
                [o.first == 0 for o in _pooled(runs[n], b)],
                clusters,
            )
            for m, b in PAIRS
        }
    lines = [
        "| configuration | " + " | ".join(f"p@1 ({n:,}) | nDCG@5 ({n:,})" for n in sizes) + " |"
    ]
    lines.append("|---" * (1 + 2 * len(sizes)) + "|")
    for c, *_ in CONFIGS:
        cells = " | ".join(f"{score[n][c][0]:.3f} | {score[n][c][1]:.3f}" for n in sizes)
        lines.append(f"| {c} | {cells} |")
    ceiling = {
        n: sum(len({(t.svc, t.setting) for t in r.topics}) for r in runs[n])
        / sum(len(r.topics) for r in runs[n])
        for n in sizes
    }
    lines.append(
        "| shared-pool ceiling (one answer per setting) | "
        + " | ".join(f"{ceiling[n]:.3f} | – " for n in sizes)
        + "|"
    )
    lines += [
        "",
        "| paired effect on p@1 | "
        + " | ".join(f"Δ [95% CI] ({n:,}) | fixed / broken | p" for n in sizes)
        + " |",
    ]
    lines.append("|---" * (1 + 3 * len(sizes)) + "|")
    for m, b in PAIRS:
        row: list[str] = []
        for n in sizes:
            e = effects[n][(m, b)]
            ci = f"{e.delta * 100:+.1f} [{e.low * 100:+.1f}, {e.high * 100:+.1f}]"
            row.append(f"{ci} | {e.fixed} / {e.broken} | {fmt_p(e.p_value)}")
        lines.append(f"| {m.split(' +')[0]} vs {b.split(' ')[0]} | " + " | ".join(row) + " |")
    counts = "; ".join(
        f"{n:,}: {len(runs[n])} store{'s' * (len(runs[n]) > 1)}, "
        f"{sum(len(r.questions) for r in runs[n]):,} questions"
        for n in sizes
    )
    extra = "" if args.marker == "noise" else f" --marker {args.marker}"
    extra += " --no-access-boost" if args.no_access_boost else ""
    extra += f" --seed {args.seed}" if args.seed != SEED else ""
    extra += f" --min-questions {args.min_questions}" if args.min_questions != MIN_QUESTIONS else ""
    lines += [
        "",
        (
            f"Embedder `{args.model}`, seeds from {args.seed}; every topic asked in "
            f"{len(QUESTIONS)} phrasings, seeded stores added until ≥ {args.min_questions:,} "
            f"questions per size ({counts}). Δ in points of p@1; CI: bootstrap over settings; "
            "p: sign test over settings. "
            f"`python benches/recall_under_noise.py --sizes {' '.join(map(str, sizes))} "
            f"--model {args.model}{extra} --update README.md`."
        ),
    ]
    for n in sizes:
        results["sizes"][str(n)] = {
            "questions": sum(len(r.questions) for r in runs[n]),
            "shared_pool_ceiling": ceiling[n],
            "configurations": [
                {"configuration": c, "p_at_1": score[n][c][0], "ndcg_at_5": score[n][c][1]}
                for c, *_ in CONFIGS
            ],
            "paired": [
                {"mechanism": m, "baseline": b, **effects[n][(m, b)].__dict__} for m, b in PAIRS
            ],
        }
    return "\n".join(lines), results


if __name__ == "__main__":
    main()
