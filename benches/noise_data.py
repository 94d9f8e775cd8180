"""The seeded store of the recall-under-noise benchmark (`recall_under_noise.py`): topics (a
setting of a service in a project), the memories a long-lived agent memory collects about each
(the current value, restatements, a re-memorised wrong guess, the superseded old value), the
questions asked of them, and what counts as a correct answer."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from octobrain.models import Memory, Source

# The clock every run reads: the store is written relative to it, and the sleep pass and every
# search take it as now, so a run does not depend on the day or on how long it took.
NOW = datetime(2026, 6, 1, tzinfo=UTC)

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

# How an agent asks: a full question, a terse lookup, and the unit-first form. Each topic is
# asked in every phrasing; the phrasings are paired questions of the same topic.
QUESTIONS = [
    "What is the {setting} of the {svc} service?",
    "{svc} {setting}",
    "How many {unit} is the {setting} of {svc} set to?",
]


@dataclass
class Topic:
    project: str
    svc: str
    setting: str
    unit: str
    value: int
    other_values: set[int] = field(default_factory=set)
    fact_id: str = ""
    kind_of: dict[str, str] = field(default_factory=dict)  # memory id -> current|guess|old
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
    now = NOW
    topics: list[Topic] = []
    rows: list[tuple[Memory, str]] = []

    def add(
        topic: Topic, kind: str, text: str, v: int, source: Source, age: float, **extra: Any
    ) -> str:
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
        topic.kind_of[memory.id] = kind
        return memory.id

    for i in range(n_topics):
        svc, setting, unit = used[i % len(used)]
        # Distinct projects for the topics sharing one setting: (c + r) mod P, r < P.
        project = projects[(i % len(used) + i // len(used)) % len(projects)]
        topic = Topic(project, svc, setting, unit, rng.randrange(10, 500))
        changed = rng.uniform(0.5, 6)  # days since the value last changed
        # Half the facts were confirmed by the user; the rest only ever inferred by agents.
        tier = Source.USER_CONFIRMED if rng.random() < 0.5 else Source.AGENT_INFERRED
        topic.fact_id = add(topic, "current", rng.choice(FACT), topic.value, tier, changed)
        for template in rng.sample(FACT, 3):
            add(
                topic,
                "current",
                template,
                topic.value,
                Source.AGENT_INFERRED,
                rng.uniform(0, changed),
            )
        step = max(1, topic.value // 10)
        guess = topic.value + rng.choice([-3, -2, -1, 1, 2, 3]) * step
        for template in rng.sample(GUESS, 3):
            add(topic, "guess", template, guess, Source.AGENT_INFERRED, rng.uniform(0, 6))
        old = rng.choice([v for v in range(10, 500, 5) if v != topic.value])
        written = rng.uniform(changed + 5, 45)
        read = {"access_count": rng.randint(3, 15), "accessed": now - timedelta(days=changed)}
        topic.old_ids = [
            add(topic, "old", rng.choice(FACT), old, tier, written, **read),
            add(
                topic,
                "old",
                rng.choice(FACT),
                old,
                Source.AGENT_INFERRED,
                rng.uniform(changed, written),
            ),
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


def correct(memory: Memory, topic: Topic, project_of: dict[str, set[str]]) -> bool:
    """Whether `memory` answers `topic`: of its project only, it states the topic's current
    value and no other value of it."""
    if project_of.get(memory.id) != {topic.project} or f"{topic.svc} service" not in memory.content:
        return False
    if topic.setting not in memory.content:
        return False
    numbers = {int(tok) for tok in memory.content.replace(",", " ").split() if tok.isdigit()}
    return topic.value in numbers and not (numbers & topic.other_values)
