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

Then one question per topic. A returned memory counts as correct when it states this topic's
current value, belongs to the asking project, and states no other value of the topic (so a
consolidation parent counts only when it did not merge conflicting values). Reported:
precision@1 and nDCG@5 of the correct answer (only the first correct result gains: a restatement
of an answer already shown adds nothing) for

    (a) the raw store, one shared pool for every project;
    (b) (a) after a sleep consolidation pass;
    (c) (a) with `supersedes` links from each current fact to the two old-value memories (what
        an agent records when it stores a changed value: `memorize` with `supersedes` links);
    (d) (a) with scope isolation: each project has its own scope and asks from it;
    (b)+(d), (c)+(d): each of the other two with isolation (isolation hides what they fix);
    (b+c+d) all three together.

    python benches/recall_under_noise.py --sizes 1000 10000 [--model hash:256] [--update README.md]

Results also go to benches/results/recall_under_noise.json (`--json`).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from octobrain.brain import Brain
from octobrain.config import Config
from octobrain.embed import get_embedder
from octobrain.models import Memory, Relationship, RelationshipType, Source, utcnow

sys.path.insert(0, str(Path(__file__).parent))
from report import replace_between

START, END = "<!-- noise:start -->", "<!-- noise:end -->"
PER_TOPIC = 9  # 1 fact + 3 restatements + 3 copies of a wrong guess + 2 old-value memories

SERVICES = ["billing", "search", "checkout", "auth", "notifications", "reporting", "ingest",
            "gateway", "scheduler", "inventory", "payments", "analytics", "export", "media",
            "profile", "catalog", "shipping", "pricing", "ledger", "audit"]  # fmt: skip
SETTINGS = [
    ("request timeout", "seconds"), ("connection pool size", "connections"),
    ("retry limit", "attempts"), ("cache TTL", "minutes"), ("batch size", "records"),
    ("rate limit", "requests per minute"), ("worker count", "workers"),
    ("queue depth alarm", "messages"), ("session lifetime", "hours"),
    ("max upload size", "megabytes"), ("log retention", "days"), ("page size", "items"),
]  # fmt: skip
# How a fact gets written down, by the user or by an agent restating it in a later session.
FACT = [
    "The {svc} service {setting} is {v} {unit}.",
    "In the {svc} service the {setting} is set to {v} {unit}.",
    "{svc} service: {setting} = {v} {unit}.",
    "We run the {svc} service with a {setting} of {v} {unit}.",
]
# An agent's guess, re-memorised (with small edits) in the sessions that followed.
GUESS = [
    "The {svc} service {setting} is probably {v} {unit}.",
    "I think the {svc} service {setting} is {v} {unit}.",
    "Probably {v} {unit}: the {svc} service {setting}.",
    "The {svc} service {setting} looks like {v} {unit}.",
]
QUESTION = "What is the {setting} of the {svc} service?"


@dataclass
class Topic:
    project: str
    svc: str
    setting: str
    unit: str
    value: int
    other_values: set[int] = field(default_factory=set)
    fact_id: str = ""
    old_ids: list[str] = field(default_factory=list)


def generate(n_memories: int, seed: int) -> tuple[list[Topic], list[tuple[Memory, str]]]:
    """Topics and (memory, project) pairs.

    Each setting of a service is shared by several projects (at least three; more as the store
    grows), each with its own value: that is what makes one shared pool ambiguous. Per topic:
    the current value, written when it changed a few days ago (confirmed by the user for half
    the topics, only inferred by an agent for the rest) and restated by agents since; an
    agent's wrong guess, re-memorised in three sessions; and the value before the change, which
    was a fact when it was written (same tier, phrased like one) and was read often while it
    held, plus an agent's restatement of it.
    """
    rng = random.Random(seed)
    n_topics = max(1, n_memories // PER_TOPIC)
    combos = [(s, st, u) for s in SERVICES for st, u in SETTINGS]
    rng.shuffle(combos)
    used = combos[: max(1, min(len(combos), n_topics // 3))]
    per_combo = math.ceil(n_topics / len(used))
    projects = [f"github.com/acme/project-{i:03d}" for i in range(max(per_combo, n_topics // 20))]
    now = utcnow()
    topics: list[Topic] = []
    rows: list[tuple[Memory, str]] = []

    def add(topic: Topic, text: str, v: int, source: Source, age: float, **extra: Any) -> str:
        when = now - timedelta(days=age)
        text = text.format(svc=topic.svc, setting=topic.setting, v=v, unit=topic.unit)
        accessed = extra.pop("accessed", when)
        memory = Memory(
            title=f"{topic.svc} {topic.setting}",
            content=text,
            scope=topic.project,
            source=source,
            importance=0.5,
            created_at=when,
            updated_at=when,
            last_accessed=accessed,
            **extra,
        )
        rows.append((memory, topic.project))
        return memory.id

    for i in range(n_topics):
        svc, setting, unit = used[i % len(used)]
        # Distinct projects for the topics sharing one setting: (c + r) mod P, r < P.
        project = projects[(i % len(used) + i // len(used)) % len(projects)]
        topic = Topic(project, svc, setting, unit, rng.randrange(10, 500))
        changed = rng.uniform(0.5, 6)  # days since the value last changed
        # Half the facts were confirmed by the user; the rest only ever inferred by agents.
        tier = Source.USER_CONFIRMED if rng.random() < 0.5 else Source.AGENT_INFERRED
        topic.fact_id = add(topic, rng.choice(FACT), topic.value, tier, changed)
        for template in rng.sample(FACT, 3):
            add(topic, template, topic.value, Source.AGENT_INFERRED, rng.uniform(0, changed))
        step = max(1, topic.value // 10)
        guess = topic.value + rng.choice([-3, -2, -1, 1, 2, 3]) * step
        for template in rng.sample(GUESS, 3):
            add(topic, template, guess, Source.AGENT_INFERRED, rng.uniform(0, 6))
        old = rng.choice([v for v in range(10, 500, 5) if v != topic.value])
        written = rng.uniform(changed + 5, 45)
        read = {"access_count": rng.randint(3, 15), "accessed": now - timedelta(days=changed)}
        topic.old_ids = [
            add(topic, rng.choice(FACT), old, tier, written, **read),
            add(topic, rng.choice(FACT), old, Source.AGENT_INFERRED, rng.uniform(changed, written)),
        ]
        topic.other_values |= {guess, old}
        topics.append(topic)
    # Other projects' values of the same setting are wrong answers here, too.
    values: dict[tuple[str, str], set[int]] = {}
    for t in topics:
        values.setdefault((t.svc, t.setting), set()).add(t.value)
    for t in topics:
        t.other_values = (t.other_values | values[(t.svc, t.setting)]) - {t.value}
    return topics, rows


def _correct(memory: Memory, topic: Topic, project_of: dict[str, set[str]]) -> bool:
    if project_of.get(memory.id) != {topic.project} or f"{topic.svc} service" not in memory.content:
        return False
    if topic.setting not in memory.content:
        return False
    numbers = {int(tok) for tok in memory.content.replace(",", " ").split() if tok.isdigit()}
    return topic.value in numbers and not (numbers & topic.other_values)


def evaluate(
    brain_for: dict[str, Brain], topics: list[Topic], project_of: dict[str, set[str]]
) -> tuple[float, float]:
    p1 = ndcg = 0.0
    for t in topics:
        brain = brain_for[t.project]
        q = QUESTION.format(setting=t.setting, svc=t.svc)
        hits = brain.remember(q, limit=5, min_relevance=0.0, record_access=False).hits
        first = next((i for i, h in enumerate(hits) if _correct(h.memory, t, project_of)), None)
        # One correct fact per question: its restatements are the same answer again, so only
        # the first correct result gains (nDCG with a single relevant answer; ideal = rank 1).
        p1 += first == 0
        ndcg += 0.0 if first is None else 1.0 / math.log2(first + 2)
    return p1 / len(topics), ndcg / len(topics)


def run(size: int, model: str, seed: int, questions: int) -> list[tuple[str, float, float]]:
    topics, rows = generate(size, seed)
    asked = random.Random(seed + 1).sample(topics, min(questions, len(topics)))
    embedder = get_embedder(model, batch_size=256)
    vectors = embedder.embed_documents([m.searchable_text() for m, _ in rows])
    out = []
    for name, consolidate, supersede, isolate in [
        ("(a) raw, shared pool", False, False, False),
        ("(b) + sleep consolidation", True, False, False),
        ("(c) + supersedes links", False, True, False),
        ("(d) + scope isolation", False, False, True),
        ("(b)+(d)", True, False, True),
        ("(c)+(d)", False, True, True),
        ("(b)+(c)+(d)", True, True, True),
    ]:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            pool = "bench/shared-pool"
            memories = []
            for m, scope in rows:
                copy = Memory(**{**m.__dict__, "scope": scope if isolate else pool})
                memories.append(copy)
            brains: dict[str, Brain] = {}
            scopes = sorted({m.scope for m in memories})
            for scope in scopes:
                brains[scope] = Brain(scope, config=Config(), embedder=embedder, uri=tmp)
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
            if consolidate:
                merged = mixed = 0
                for brain in brains.values():
                    for c in brain.sleep_consolidate().consolidations:
                        # A parent belongs to its members' project(s); several means a pooled
                        # store merged two projects' memories, which is never a correct answer.
                        project_of[c.parent.id] = set().union(
                            *(project_of[m.id] for m in c.members)
                        )
                        merged += 1
                        mixed += len(project_of[c.parent.id]) > 1
                print(f"  {merged} clusters merged, {mixed} across projects", file=sys.stderr)
            first.store.compact()
            brain_for = {t.project: brains[t.project if isolate else pool] for t in topics}
            p1, ndcg = evaluate(brain_for, asked, project_of)
        out.append((name, p1, ndcg))
        took = time.perf_counter() - t0
        print(
            f"{size:>6} {name:<28} p@1 {p1:.3f}  nDCG@5 {ndcg:.3f}  ({took:.0f} s)", file=sys.stderr
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--model", default="hash:256")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--update", type=Path, help="rewrite the table in this README")
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).parent / "results" / "recall_under_noise.json"
    )
    args = parser.parse_args()
    results = {n: run(n, args.model, args.seed, args.questions) for n in args.sizes}
    args.json.write_text(
        json.dumps(
            {
                "model": args.model,
                "seed": args.seed,
                "questions": args.questions,
                "results": {
                    str(n): [{"configuration": c, "p_at_1": p, "ndcg_at_5": g} for c, p, g in rows]
                    for n, rows in results.items()
                },
            },
            indent=2,
        )
        + "\n"
    )
    header = "| configuration | " + " | ".join(f"p@1 ({n:,}) | nDCG@5 ({n:,})" for n in args.sizes)
    lines = [header + " |", "|---" * (1 + 2 * len(args.sizes)) + "|"]
    for i, (name, _, _) in enumerate(results[args.sizes[0]]):
        cells = " | ".join(f"{results[n][i][1]:.3f} | {results[n][i][2]:.3f}" for n in args.sizes)
        lines.append(f"| {name} | {cells} |")
    lines.append("")
    lines.append(
        f"Embedder `{args.model}`, seed {args.seed}, one question per topic, "
        f"at most {args.questions} per size; "
        f"`python benches/recall_under_noise.py --sizes {' '.join(map(str, args.sizes))} "
        f"--model {args.model} --update README.md`."
    )
    table = "\n".join(lines)
    print(table)
    if args.update:
        replace_between(args.update, START, END, table)


if __name__ == "__main__":
    main()
