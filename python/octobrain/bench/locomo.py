"""`octobrain bench locomo`: conversation memory on LoCoMo, through the product's own path.

Each conversation is ingested with `Brain.ingest` (one memory per turn, with its context) into a
scope of its own — one agent's memory of one long conversation, as published LoCoMo systems
evaluate it — and every question runs through `Brain.remember` (threshold 0, limit 50).

Measured per question against its annotated evidence turns: turn-level nDCG@10 and Recall@5/10,
and session-level Recall@5 (sessions ranked by their best turn; the share of the evidence's
sessions among the first five; per question also whether all of them, or any, are there).
Reported overall, per category, and per half of the conversations (alternate conversations),
so a change can be checked on two independent halves. Each evidence session missing from the
first five is also looked up in each retrieval leg's own ranking (the same question through
`remember` with BM25 only and with vectors only): one that no leg ranks among its first five
is missed by retrieval itself, one that a leg does is lost in fusion.
The adversarial questions (category 5: things never said, or said by the other speaker) run
through the same call as the others; for each question its best relevance among the returned
turns decides whether the product's default threshold (`search.min_relevance`) would answer it
at all, and whether with a turn of relevance ≥ 0.6. Reported for the adversarial and the
answerable questions side by side, with the AUC of the best relevance (the chance that an
answerable question's best relevance beats an adversarial one's; 0.5 = no separation):
"nothing found" is the honest answer to an adversarial question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.bench.datasets import ndcg_at_k, recall_at_k
from octobrain.bench.locomo_data import load_locomo
from octobrain.config import Config
from octobrain.errors import InvalidInput
from octobrain.store import seen

__all__ = [
    "CATEGORIES",
    "LocomoReport",
    "auc",
    "first_sessions",
    "missed_sessions",
    "run_locomo",
    "session_recall",
]

DEPTH = 50
LEG_MODES = ("bm25", "dense")  # `bench beir` modes: one retrieval leg each
HIGH_RELEVANCE = 0.6
SCOPE_PREFIX = "bench/locomo/"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass
class LocomoReport:
    """What one `bench locomo` run measured (see `as_dict`)."""

    model: str
    window: int = 0
    topic_words: int = 0
    variant: str = ""
    conversations: int = 0
    turns: int = 0
    questions: int = 0
    ingest_seconds: float = 0.0
    embedded: int = 0
    cached: int = 0
    search_p50_ms: float = 0.0
    search_p95_ms: float = 0.0
    overall: dict[str, float] = field(default_factory=dict)
    halves: dict[str, dict[str, float]] = field(default_factory=dict)
    categories: dict[str, dict[str, float]] = field(default_factory=dict)
    adversarial: dict[str, float] = field(default_factory=dict)
    missed_sessions: dict[str, dict[str, int]] = field(default_factory=dict)  # "all", categories
    # Session Recall@5 if fusion kept every missed evidence session a leg alone ranks in its
    # first five (and displaced none that it has): what no re-ranking of the legs can exceed.
    fusion_bound: float = 0.0
    machine: str = ""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        out = dict(self.__dict__)
        out["turns_per_second"] = self.turns / self.ingest_seconds if self.ingest_seconds else 0.0
        return out


def session_of(dia_id: str) -> str:
    """The session of a LoCoMo turn id: "D3:5" → "3"."""
    return dia_id.split(":", 1)[0].lstrip("D")


def first_sessions(ranked: Sequence[str], k: int = 5) -> set[str]:
    """The first `k` distinct sessions of a ranking of turn ids."""
    sessions: list[str] = []
    for dia in ranked:
        s = session_of(dia)
        if s not in sessions:
            sessions.append(s)
            if len(sessions) == k:
                break
    return set(sessions)


def session_recall(ranked: Sequence[str], evidence: Sequence[str], k: int = 5) -> float:
    """The share of the evidence's sessions among the first `k` sessions of the ranking."""
    wanted = {session_of(d) for d in evidence}
    return len(wanted & first_sessions(ranked, k)) / len(wanted) if wanted else 0.0


def missed_sessions(ranked: Sequence[str], evidence: Sequence[str], k: int = 5) -> list[str]:
    """Where each evidence session missing from the first `k` sessions of the ranking is:
    `"6-10"` (by its best turn's place among the sessions), `"11+"`, or `"absent"` (no turn
    of it was returned)."""
    order = list(dict.fromkeys(session_of(d) for d in ranked))
    out = []
    for s in dict.fromkeys(session_of(d) for d in evidence):
        at = order.index(s) + 1 if s in order else 0
        if not 0 < at <= k:
            out.append("absent" if not at else "6-10" if at <= 2 * k else "11+")
    return out


def _legs_found(
    ranked: Sequence[str], evidence: Sequence[str], legs: Sequence[Sequence[str]], k: int = 5
) -> list[int]:
    """For each evidence session missing from the first `k` sessions of `ranked`: among how
    many of the single-leg rankings `legs` it is in the first `k`."""
    first = first_sessions(ranked, k)
    alone = [first_sessions(leg, k) for leg in legs]
    wanted = dict.fromkeys(session_of(d) for d in evidence)
    return [sum(s in found for found in alone) for s in wanted if s not in first]


def _scores(ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    judged = dict.fromkeys(evidence, 1)
    sessions = session_recall(ranked, evidence, 5)
    return {
        "ndcg_at_10": ndcg_at_k(ranked, judged, 10),
        "recall_at_5": recall_at_k(ranked, judged, 5),
        "recall_at_10": recall_at_k(ranked, judged, 10),
        "session_recall_at_5": sessions,
        # The same share, counted per question: all of its evidence sessions among the first
        # five (LongMemEval's recall_all@5), or at least one.
        "session_all_at_5": float(sessions == 1.0),
        "session_any_at_5": float(sessions > 0.0),
    }


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The chance that a positive scores above a negative (ties count half)."""
    if not positives or not negatives:
        return 0.0
    pos = np.asarray(positives, dtype=np.float64)[:, None]
    neg = np.asarray(negatives, dtype=np.float64)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def _abstention(
    adversarial: Sequence[float], answerable: Sequence[float], floor: float
) -> dict[str, float]:
    """Shares of each kind whose best relevance reaches `floor` and `HIGH_RELEVANCE`, and AUC."""

    def share(values: Sequence[float], at: float) -> float:
        return sum(1 for v in values if v >= at) / len(values) if values else 0.0

    return {
        "questions": float(len(adversarial)),
        "threshold": floor,
        "answered_share": share(adversarial, floor),
        "high_relevance_share": share(adversarial, HIGH_RELEVANCE),
        "answerable_answered_share": share(answerable, floor),
        "answerable_high_share": share(answerable, HIGH_RELEVANCE),
        "auc": auc(answerable, adversarial),
    }


def _mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    out["questions"] = float(len(rows))
    return out


def run_locomo(
    data: Path,
    *,
    model: str = "minilm",
    cache_dir: Path | None = None,
    config: Config | None = None,
    window: int | None = None,
    topic_words: int | None = None,
    variant: str | None = None,
    on_ingest: Callable[[int], None] | None = None,
    on_query: Callable[[], None] | None = None,
) -> LocomoReport:
    """Ingest every conversation of `data` and evaluate every question (see the module doc).
    `window`: neighbouring turns in each turn's context (default `ingest.WINDOW`; 0 for the
    ablation without neighbours). `variant`: one of `locomo_variants.VARIANTS`, measured
    against the shipped path (see that module)."""
    from octobrain.bench.beir import _cpus, _QueryMemo, mode_config
    from octobrain.bench.locomo_variants import (
        VARIANTS,
        FeedbackEmbedder,
        SessionWords,
        WindowVectors,
        WordNeighbours,
        decompose,
        interleave,
        relevance_of,
        rerank,
        without_names,
    )
    from octobrain.embed.cache import CachedEmbedder
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain
    from octobrain.memory.ingest import TOPIC_WORDS, WINDOW, ingest, turn_id

    if variant and variant not in VARIANTS:
        raise InvalidInput("variant", f"must be one of {', '.join(VARIANTS)}, got {variant!r}")

    conversations, questions = load_locomo(data)
    cached = CachedEmbedder(get_embedder(model, batch_size=64), cache_dir)
    memo = _QueryMemo(cached)
    feedback = FeedbackEmbedder(memo) if variant in ("dense-feedback", "no-names") else None
    embedder = feedback or memo
    base = config or Config()
    search = replace(base.search, max_results=DEPTH)
    base = replace(base, search=search)
    report = LocomoReport(cached.model_id, machine=f"{_cpus()} CPUs, shared")
    report.variant = variant or ""
    names = sorted({t.speaker for c in conversations for t in c.turns})
    sessions = {c.key: SessionWords(c) for c in conversations} if variant == "session-words" else {}
    windows = WindowVectors(embedder) if variant == "window-vector" else None
    report.window = WINDOW if window is None else window
    report.topic_words = TOPIC_WORDS if topic_words is None else topic_words
    report.conversations = len(conversations)
    halves = {c.key: "A" if i % 2 == 0 else "B" for i, c in enumerate(conversations)}
    with seen.scratch("octobrain-locomo-") as tmp:
        root = Brain("bench/locomo", config=base, embedder=embedder, uri=Path(tmp))
        if variant == "word-neighbours":  # (every scope's Brain shares the root's retriever)
            root.retriever.words_query = WordNeighbours(embedder, conversations)
        brains: dict[str, Brain] = {}
        dia_of: dict[str, str] = {}
        start = time.perf_counter()
        for conv in conversations:
            brain = brains[conv.key] = root.for_scope(SCOPE_PREFIX + conv.key)
            for turn in conv.turns:
                dia_of[turn_id(brain.scope, conv.key, turn.key)] = turn.key
            ingest(
                brain,
                [conv],
                window=WINDOW if window is None else window,
                topic_words=TOPIC_WORDS if topic_words is None else topic_words,
                progress=on_ingest or (lambda _n: None),
            )
            report.turns += len(conv.turns)
        report.ingest_seconds = time.perf_counter() - start
        report.embedded, report.cached = cached.misses, cached.hits
        root.retriever.corpus.refresh()
        # Each leg alone (words: BM25 only; meaning: vectors only), to tell an evidence
        # session no leg finds from one that fusion loses.
        legs = [
            Brain(root.scope, config=mode_config(base, m), embedder=embedder, uri=Path(tmp))
            for m in LEG_MODES
        ]
        leg_brains = {
            c.key: [leg.for_scope(SCOPE_PREFIX + c.key) for leg in legs] for c in conversations
        }
        rows: dict[str, list[dict[str, float]]] = {}
        latencies: list[float] = []
        lost: list[float] = []  # per question: the share of its sessions fusion lost
        # The best relevance of each question, per half: adversarial, answerable.
        best: dict[str, tuple[list[float], list[float]]] = {h: ([], []) for h in ("A", "B")}
        for q in questions:
            if q.conversation not in brains or not (q.category == 5 or q.evidence):
                continue
            brain = brains[q.conversation]
            if feedback is not None and variant == "no-names":  # (the vector leg's query)
                feedback.replaced[q.text] = memo.embed_query(without_names(q.text, names))
            embedder.embed_query(q.text)  # the query embedding is timed apart
            t0 = time.perf_counter()
            recall = brain.remember(q.text, limit=DEPTH, min_relevance=0.0, record_access=False)
            hits = recall.hits
            if sessions:
                keys = [dia_of.get(h.memory.id, "") for h in hits]
                hits = rerank(hits, sessions[q.conversation].scores(q.text, keys))
            elif windows is not None:
                hits = rerank(hits, windows.scores(q.text, hits))
            elif variant == "decompose" and (parts := decompose(q.text)):
                hits = interleave(
                    [
                        brain.remember(p, limit=DEPTH, min_relevance=0.0, record_access=False).hits
                        for p in parts
                    ]
                )
            elif feedback is not None and variant == "dense-feedback":
                corpus = brain.retriever.corpus
                feedback.feedback(q.text, corpus, hits)
                again = brain.remember(q.text, limit=DEPTH, min_relevance=0.0, record_access=False)
                feedback.forget(q.text)
                hits = relevance_of(q.text, memo.embed_query(q.text), corpus, again.hits)
            top = max((h.relevance for h in hits), default=0.0)
            best[halves[q.conversation]][0 if q.category == 5 else 1].append(top)
            if q.category != 5:
                latencies.append((time.perf_counter() - t0) * 1000.0)
                ranked = [dia_of.get(h.memory.id, "") for h in hits]
                scores = _scores(ranked, q.evidence)
                missed = missed_sessions(ranked, q.evidence)
                for where in missed:
                    for key in ("all", CATEGORIES.get(q.category, "other")):
                        counts = report.missed_sessions.setdefault(key, {})
                        counts[where] = counts.get(where, 0) + 1
                alone = [  # (asked only when an evidence session was missed)
                    [
                        dia_of.get(h.memory.id, "")
                        for h in leg.remember(
                            q.text, limit=DEPTH, min_relevance=0.0, record_access=False
                        ).hits
                    ]
                    for leg in (leg_brains[q.conversation] if missed else [])
                ]
                found = _legs_found(ranked, q.evidence, alone) if missed else []
                for n in found:
                    counts = report.missed_sessions.setdefault("legs", {})
                    counts[str(n)] = counts.get(str(n), 0) + 1
                wanted = {session_of(d) for d in q.evidence}
                lost.append(sum(1 for n in found if n) / len(wanted))
                for key in ("all", halves[q.conversation], CATEGORIES.get(q.category, "other")):
                    rows.setdefault(key, []).append(scores)
            if on_query is not None:
                on_query()
    report.questions = len(rows.get("all", []))
    report.overall = _mean(rows.get("all", []))
    report.halves = {h: _mean(rows[h]) for h in ("A", "B") if h in rows}
    report.categories = {name: _mean(rows[name]) for name in CATEGORIES.values() if name in rows}
    if lost:
        report.fusion_bound = report.overall["session_recall_at_5"] + float(np.mean(lost))
    if latencies:
        report.search_p50_ms, report.search_p95_ms = (
            float(v) for v in np.percentile(latencies, [50, 95])
        )
    floor = base.search.min_relevance
    adversarial = [*best["A"][0], *best["B"][0]]
    if adversarial:
        report.adversarial = _abstention(adversarial, [*best["A"][1], *best["B"][1]], floor)
        for h, (adv, ans) in best.items():
            if adv and ans:
                report.adversarial[f"auc_half_{h}"] = auc(ans, adv)
    cached.close()
    return report


def locomo_table(report: dict[str, Any]) -> str:
    """The README table of one `bench locomo` report."""
    head = (
        f"{report['conversations']} conversations, {report['turns']:,} turns, "
        f"{report['questions']} questions with evidence, model `{report['model']}`, "
        f"context: ±{report['window']} neighbouring turns (indexed by words, not embedded) "
        f"and {report['topic_words']} session words, "
        + (f"variant `{report['variant']}`, " if report.get("variant") else "")
        + f"{report['machine']}."
    )
    lines = [
        head,
        "",
        "| questions | n | nDCG@10 | Recall@5 | Recall@10 | session Recall@5 | all@5 | any@5 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups = [("**all**", report["overall"])]
    groups += [(f"half {h}", m) for h, m in report["halves"].items()]
    groups += list(report["categories"].items())
    for name, m in groups:
        if not m:
            continue
        lines.append(
            f"| {name} | {int(m['questions'])} | {m['ndcg_at_10']:.3f} | {m['recall_at_5']:.3f} "
            f"| {m['recall_at_10']:.3f} | {m['session_recall_at_5']:.3f} "
            f"| {m['session_all_at_5']:.3f} | {m['session_any_at_5']:.3f} |"
        )
    adv = report.get("adversarial") or {}
    lines.append("")
    lines.append(
        "Session Recall@5: the share of a question's evidence sessions among the first five "
        "sessions (ranked by their best turn); all@5 and any@5: the share of questions with all "
        "of them there, or at least one (LongMemEval's recall_all@5 and recall_any@5; any@5 is "
        "the session-level recall published LoCoMo systems quote)."
    )
    if adv:
        halves = " / ".join(
            f"{adv[f'auc_half_{h}']:.3f}" for h in ("A", "B") if f"auc_half_{h}" in adv
        )
        lines.append(
            f"Adversarial questions ({int(adv['questions'])}): "
            f"{adv['answered_share']:.0%} get a memory at the default threshold "
            f"(relevance ≥ {adv['threshold']:g}), "
            f"{adv['high_relevance_share']:.0%} one of relevance ≥ {HIGH_RELEVANCE} (answerable "
            f"questions: {adv['answerable_answered_share']:.0%} and "
            f"{adv['answerable_high_share']:.0%}); AUC of the best relevance, answerable against "
            f"adversarial: {adv['auc']:.3f}" + (f" (halves A / B: {halves})." if halves else ".")
        )
    missed = report.get("missed_sessions") or {}
    if missed.get("all"):
        every = missed["all"]
        per = ", ".join(
            f"{name} {sum(missed[name].values())}" for name in CATEGORIES.values() if name in missed
        )
        lines.append(
            f"Evidence sessions outside the first five: {sum(every.values())} "
            f"({every.get('6-10', 0)} ranked 6th–10th, {every.get('11+', 0)} lower, "
            f"{every.get('absent', 0)} with no turn among the {DEPTH} returned; {per})."
        )
        legs = missed.get("legs") or {}
        if legs:
            lines.append(
                f"Of these, {legs.get('0', 0)} are outside the first five sessions of each "
                "retrieval leg alone too (BM25 only, vectors only: `bench beir` modes `bm25`, "
                f"`dense`), {legs.get('1', 0)} within one leg's and {legs.get('2', 0)} within "
                "both: fusion lost those; had it kept them all, session Recall@5 would be "
                f"{report.get('fusion_bound', 0.0):.3f}."
            )
    embedded = f"{report['embedded']:,} embedded, {report['cached']:,} from the embedding cache"
    lines.append(
        f"Ingest {report['turns_per_second']:.1f} turns/s ({embedded}); "
        f"search p50 {report['search_p50_ms']:.1f} ms, p95 {report['search_p95_ms']:.1f} ms "
        "(query embedding apart)."
    )
    return "\n".join(lines)
