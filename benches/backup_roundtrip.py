"""Backup check: export a 10k-memory store (links and consolidations included), import it into
an empty store, and compare every field of every memory, edge and journal record.

    python benches/backup_roundtrip.py --memories 10000 [--update README.md]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from octobrain.models import Memory, Relationship, RelationshipType, Source
from octobrain.store import link_rules, seen
from octobrain.store.consolidations import ConsolidationLog
from octobrain.times import utcnow
from report import check_update, update_readme

SCOPE = "github.com/acme/backup"
WORDS = [
    "cache",
    "queue",
    "index",
    "shard",
    "replica",
    "token",
    "latency",
    "retry",
    "budget",
    "schema",
    "deploy",
    "rollback",
]


def _populate(brain: Brain, n: int, rng: random.Random) -> None:
    now = utcnow()
    memories = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        when = now - timedelta(days=rng.randrange(0, 30), minutes=i)
        memories.append(
            Memory(
                title=f"Note {i}: {rng.choice(WORDS)} {rng.choice(WORDS)}",
                content=f"Finding {i} about {words}.",
                scope=SCOPE if i % 10 else "",
                tags=[rng.choice(WORDS)],
                importance=round(rng.random(), 3),
                source=rng.choice(list(Source)),
                created_at=when,
                updated_at=when,
                last_accessed=when,
                access_count=rng.randrange(0, 5),
            )
        )
    # Near-duplicate triples written today, so the sleep pass has something to consolidate.
    for j in range(n // 100):
        text = f"Incident {j}: the {rng.choice(WORDS)} service drops requests under load."
        for k in range(3):
            memories.append(
                Memory(title=f"Incident {j} note", content=text, scope=SCOPE, tags=[f"copy{k}"])
            )
    for start in range(0, len(memories), 1000):
        batch = memories[start : start + 1000]
        brain.store.add(batch, brain.embedder.embed_documents([m.searchable_text() for m in batch]))
    ids = [m.id for m in memories]
    # Every link type a user or octobrain writes, but `consolidated_from`: octobrain writes
    # those only with the consolidation record naming them (the sleep pass below), and an
    # import refuses one without it.
    kinds = [t for t in RelationshipType if t is not RelationshipType.CONSOLIDATED_FROM]
    edges = [
        Relationship(*rng.sample(ids, 2), rng.choice(kinds), 0.5, "", SCOPE) for _ in range(n // 5)
    ]
    # Only links `memory relate` writes (two memories; one goal a note closes, no supersedes
    # cycle, …): an import refuses a file holding a link of a memory to itself, and leaves
    # the others out, so they never came back.
    brain.store.add_relationships(link_rules.sift(brain.store, edges)[0])
    brain.sleep_consolidate(threshold=0.95, min_size=3, max_age_days=1)


def _snapshot(brain: Brain) -> dict[str, Any]:
    store = brain.store
    memories = {r["id"]: {**r, "embedding": list(r["embedding"])} for r in store.scan("true")}
    edges = {r.id: r for r in store.all_relationships()}
    journal = {r.id: r.__dict__ for r in ConsolidationLog(store).find("true")}
    return {"memories": memories, "relationships": edges, "consolidations": journal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--update", type=Path, help="rewrite the backup block of this README")
    args = parser.parse_args()
    check_update(parser, args.update, "backup")
    embedder = get_embedder("hash:64")
    with seen.scratch("octobrain-backup-") as tmp:  # (no mark of its stores left behind)
        source = Brain(SCOPE, config=Config(), embedder=embedder, uri=tmp / "a")
        _populate(source, args.memories, random.Random(args.seed))
        global_view = Brain("", config=Config(), embedder=embedder, uri=tmp / "a")
        dumps = []
        t0 = time.perf_counter()
        for brain in (source, global_view):  # a project export holds its rows + global ones
            out = io.StringIO()
            export_jsonl(brain, out, embeddings=True)
            dumps.append(out.getvalue())
        t1 = time.perf_counter()
        target = Brain(SCOPE, config=Config(), embedder=embedder, uri=tmp / "b")
        for dump in dumps:
            import_jsonl(target, dump.splitlines())
        t2 = time.perf_counter()
        before, after = _snapshot(source), _snapshot(target)
    mismatches = sum(
        before[table].get(key) != after[table].get(key)
        for table in before
        for key in set(before[table]) | set(after[table])
    )
    counts = {table: len(rows) for table, rows in before.items()}
    table = "\n".join(
        [
            "| what | rows | export | import | rows differing after the round trip |",
            "|---|---:|---:|---:|---:|",
            f"| memories (every column, embeddings included) / edges / consolidation records | "
            f"{counts['memories']:,} / {counts['relationships']:,} / "
            f"{counts['consolidations']:,} | "
            f"{t1 - t0:.1f} s | {t2 - t1:.1f} s | {mismatches} |",
            "",
            f"`python benches/backup_roundtrip.py --memories {args.memories} --update README.md` "
            "(hash embedder).",
        ]
    )
    print(table)
    if args.update:
        update_readme(args.update, "backup", table)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
