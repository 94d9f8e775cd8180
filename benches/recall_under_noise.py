"""Recall under noise: does curating memory make recall better as the junk drawer grows?

A seeded generator writes, for each topic (a setting of some service in some project), one
correct fact (user-confirmed) plus the noise a long-lived agent memory collects:

- near-duplicate restatements of the correct fact (re-memorised across sessions, small edits);
- slightly wrong variants (the agent's guesses, a nearby wrong value, agent-inferred);
- superseded old versions (the value before it changed, written weeks earlier);
- other projects' memories about the same setting of a same-named service (other values).

Then one question per topic. A returned memory counts as correct when it states this topic's
current value, belongs to the asking project, and states no other value of the topic (so a
consolidation parent counts only when it did not merge conflicting values). Reported:
precision@1 and nDCG@5 of the correct answer (only the first correct result gains: a restatement
of an answer already shown adds nothing) for

    (a) the raw store, one shared pool for every project;
    (b) (a) after a sleep consolidation pass;
    (c) (a) with `supersedes` links from each correct fact to its old versions;
    (d) (a) with scope isolation: each project has its own scope and asks from it;
    (b+c+d) all three together.

    python benches/recall_under_noise.py --sizes 1000 10000 [--model hash:256] [--update README.md]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from octobrain.brain import Brain
from octobrain.config import Config
from octobrain.embed import get_embedder
from octobrain.models import Memory, Relationship, RelationshipType, Source, utcnow

sys.path.insert(0, str(Path(__file__).parent))
from report import replace_between

START, END = "<!-- noise:start -->", "<!-- noise:end -->"
PER_TOPIC = 14  # 1 fact + 3 restatements + 2 wrong + 2 old + 2 other projects × 3

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
FACT = [
    "The {svc} service {setting} is {v} {unit}.",
    "In the {svc} service the {setting} is set to {v} {unit}.",
    "{svc} service: {setting} = {v} {unit}.",
    "We run the {svc} service with a {setting} of {v} {unit}.",
]
WRONG = [
    "I think the {svc} service {setting} is probably {v} {unit}, not verified.",
    "Guess: {svc} {setting} might be {v} {unit} (from an old chat).",
]
OLD = "The {svc} service {setting} was {v} {unit} (set at launch)."
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
    """Topics and (memory, topic key) pairs; every memory is tagged with its project."""
    rng = random.Random(seed)
    n_topics = n_memories // PER_TOPIC
    projects = [f"github.com/acme/project-{i:03d}" for i in range(max(2, n_topics // 20))]
    combos = [(s, st, u) for s in SERVICES for st, u in SETTINGS]
    rng.shuffle(combos)
    now = utcnow()
    topics: list[Topic] = []
    rows: list[tuple[Memory, str]] = []

    def add(
        topic: Topic, text: str, v: int, *, scope: str, source: Source, age_days: float
    ) -> Memory:
        when = now - timedelta(days=age_days)
        title = f"{topic.svc} {topic.setting}"
        memory = Memory(title=title, content=text.format(svc=topic.svc, setting=topic.setting,
                        v=v, unit=topic.unit), scope=scope, source=source, importance=0.5,
                        created_at=when, updated_at=when, last_accessed=when)  # fmt: skip
        rows.append((memory, scope))
        return memory

    for i in range(n_topics):
        svc, setting, unit = combos[i % len(combos)]
        # Several projects run a same-named service: that is what makes a shared pool ambiguous.
        project = projects[i % len(projects)]
        others = [p for p in projects if p != project]
        value = rng.randrange(10, 500)
        topic = Topic(project, svc, setting, unit, value)
        fact = add(
            topic,
            FACT[rng.randrange(4)],
            value,
            scope=project,
            source=Source.USER_CONFIRMED,
            age_days=rng.uniform(0, 6),
        )
        topic.fact_id = fact.id
        for template in rng.sample(FACT[1:], 3):
            add(
                topic,
                template,
                value,
                scope=project,
                source=Source.AGENT_INFERRED,
                age_days=rng.uniform(0, 6),
            )
        for template in WRONG:
            wrong = value + rng.choice([-3, -2, -1, 1, 2, 3]) * max(1, value // 10)
            topic.other_values.add(wrong)
            add(
                topic,
                template,
                wrong,
                scope=project,
                source=Source.AGENT_INFERRED,
                age_days=rng.uniform(0, 6),
            )
        for _ in range(2):
            old = rng.randrange(10, 500)
            topic.other_values.add(old)
            topic.old_ids.append(
                add(
                    topic,
                    OLD,
                    old,
                    scope=project,
                    source=Source.USER_CONFIRMED,
                    age_days=rng.uniform(20, 60),
                ).id
            )
        for other in rng.sample(others, 2):  # their own junk drawer: a fact and restatements
            v = rng.randrange(10, 500)
            topic.other_values.add(v)
            for k, template in enumerate(rng.sample(FACT, 3)):
                tier = Source.USER_CONFIRMED if k == 0 else Source.AGENT_INFERRED
                add(topic, template, v, scope=other, source=tier, age_days=rng.uniform(0, 6))
        topic.other_values.discard(value)
        topics.append(topic)
    return topics, rows  # fmt: skip


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
    args = parser.parse_args()
    results = {n: run(n, args.model, args.seed, args.questions) for n in args.sizes}
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
