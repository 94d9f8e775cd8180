"""`remember` with several queries: how their rankings are merged, by score against by rank.

    python benches/multi_query.py --locomo ../shared/data/locomo-dev \
        --scifact ../shared/data/scifact --output benches/results/multi_query.json

Each dataset is stored once (LoCoMo: each conversation ingested into its own scope, as `bench
locomo` does; SciFact: each document a memory, as `bench beir --path memory` does; the bundled
model, vectors from the embedding cache), then every question is asked two ways:

- the same need in two phrasings: the question and its content words alone (what an agent
  following the tool's advice sends), scored against the question's evidence (nDCG@10, Recall@10);
- two questions at once: the question and another question of the same conversation (SciFact:
  another query) drawn at random (seed 7), each scored against its own evidence (Recall@10 of
  the one ranking).

`score` is the shipped merge (each query's fused scores min-max normalised and summed, in
Rust); `rank` is the merge before it, reciprocal-rank fusion of the queries' rankings (k = 60),
run here by overriding `Retriever._merge` in this process.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.bench.beir import DEPTH, _memory, _QueryMemo
from octobrain.bench.datasets import load_beir, ndcg_at_k, recall_at_k
from octobrain.bench.locomo import SCOPE_PREFIX
from octobrain.bench.locomo_data import load_locomo
from octobrain.config import Config
from octobrain.embed.cache import CachedEmbedder
from octobrain.embed.factory import get_embedder
from octobrain.kernels import fusion
from octobrain.kernels.hybrid import Scored
from octobrain.memory.brain import Brain
from octobrain.memory.ingest import ingest, turn_id
from octobrain.memory.search import Retriever

_CLOSED = {
    *("what", "when", "where", "who", "whom", "which", "why", "how", "did", "does", "do", "is"),
    *("are", "was", "were", "has", "have", "had", "the", "a", "an", "of", "to", "in", "on"),
    *("for", "with", "and", "or", "her", "his", "their", "its", "about", "after", "before"),
    *("by", "be", "as", "that", "this"),
}
Ask = Callable[[int, list[str]], list[str]]  # (question, queries) → evidence ids, best first


def content_words(question: str) -> str:
    """`question` without its closed-class words: a second phrasing of the same need."""
    return " ".join(w for w in re.findall(r"[\w'-]+", question) if w.lower() not in _CLOSED)


def merge_by_rank(self: Retriever, per_query: list[list[Scored]]) -> list[Scored]:
    """The merge before: reciprocal-rank fusion of the queries' rankings."""
    best: dict[int, Scored] = {}
    for scored in per_query:
        for s in scored:
            if s.pos not in best or s.relevance > best[s.pos].relevance:
                best[s.pos] = s
    fused = fusion.rrf([[s.pos for s in scored] for scored in per_query if scored], k=60.0)
    top = max(fused.scores) if fused.scores else 1.0
    return [
        replace(best[pos], fused=score / top)
        for pos, score in zip(fused.ids, fused.scores, strict=True)
    ]


def measure(
    questions: Sequence[tuple[str, dict[str, int]]], groups: Sequence[int], ask: Ask
) -> dict[str, float]:
    """Both ways of asking, over `questions` (text, judgments); a question's second question is
    drawn from those of its own group."""
    rng = random.Random(7)
    same, pair = [], []
    for i, (text, judged) in enumerate(questions):
        ranked = ask(i, [text, content_words(text)])
        same.append((ndcg_at_k(ranked, judged), recall_at_k(ranked, judged, 10)))
        others = [j for j in range(len(questions)) if groups[j] == groups[i] and j != i]
        other_text, other_judged = questions[rng.choice(others)]
        ranked = ask(i, [text, other_text])
        pair.append((recall_at_k(ranked, judged, 10), recall_at_k(ranked, other_judged, 10)))
    s, p = np.array(same).mean(axis=0), np.array(pair).mean(axis=0)
    return {
        "same_need_ndcg_at_10": float(s[0]),
        "same_need_recall_at_10": float(s[1]),
        "two_questions_recall_at_10_first": float(p[0]),
        "two_questions_recall_at_10_second": float(p[1]),
        "questions": len(questions),
    }


def locomo(data: Path, embedder: Any, config: Config, root: Path) -> dict[str, float]:
    conversations, questions = load_locomo(data)
    top = Brain("bench/multi-query", config=config, embedder=embedder, uri=root)
    brains, unit = {}, {}
    for conv in conversations:
        brain = brains[conv.key] = top.for_scope(SCOPE_PREFIX + conv.key)
        for turn in conv.turns:
            unit[turn_id(brain.scope, conv.key, turn.key)] = turn.key
        ingest(brain, [conv])
    asked = [q for q in questions if q.category != 5 and q.evidence and q.conversation in brains]
    group_of = {key: i for i, key in enumerate(brains)}

    def ask(i: int, queries: list[str]) -> list[str]:
        brain = brains[asked[i].conversation]
        hits = brain.remember(queries, limit=DEPTH, min_relevance=0.0, record_access=False).hits
        return [unit.get(h.memory.id, "") for h in hits]

    judged = [(q.text, dict.fromkeys(q.evidence, 1)) for q in asked]
    return measure(judged, [group_of[q.conversation] for q in asked], ask)


def scifact(data: Path, embedder: Any, config: Config, root: Path) -> dict[str, float]:
    dataset = load_beir(data)
    titles = dataset.doc_titles or [""] * len(dataset.doc_ids)
    _, store_all, searcher = _memory(dataset, titles, config, embedder, root)
    store_all(config, lambda _n: None)
    search = searcher(config)  # (document ids; it asks `remember`, which takes a list too)
    judged = [
        (text, dataset.qrels[qid])
        for qid, text in zip(dataset.query_ids, dataset.query_texts, strict=True)
        if qid in dataset.qrels
    ]
    return measure(judged, [0] * len(judged), lambda _i, queries: search(queries))  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True)
    parser.add_argument("--scifact", type=Path, required=True)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    embedder = _QueryMemo(CachedEmbedder(get_embedder("minilm", batch_size=64), None))
    base = Config()
    config = replace(base, search=replace(base.search, max_results=DEPTH))
    shipped = Retriever._merge
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, run, data in (("LoCoMo", locomo, args.locomo), ("SciFact", scifact, args.scifact)):
        for merge_name, merge in (("score", shipped), ("rank", merge_by_rank)):
            Retriever._merge = merge  # type: ignore[method-assign]
            with tempfile.TemporaryDirectory(prefix="octobrain-multi-") as tmp:
                results.setdefault(name, {})[merge_name] = run(data, embedder, config, Path(tmp))
    Retriever._merge = shipped  # type: ignore[method-assign]
    print(
        "| dataset | merge | same need: nDCG@10 | same need: Recall@10 | two questions: Recall@10 |"
    )
    print("|---|---|---|---|---|")
    for name, by_merge in results.items():
        for merge_name, r in by_merge.items():
            print(
                f"| {name} | {merge_name} | {r['same_need_ndcg_at_10']:.3f} | "
                f"{r['same_need_recall_at_10']:.3f} | {r['two_questions_recall_at_10_first']:.3f}"
                f" / {r['two_questions_recall_at_10_second']:.3f} |"
            )
    if args.output:
        args.output.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
