"""Our BEIR metrics against trec_eval itself (pytrec-eval-terrier), on random graded runs."""

from __future__ import annotations

import random

import pytest

from octobrain.bench.datasets import evaluate, mrr_at_k, ndcg_at_k, recall_at_k

pytrec_eval = pytest.importorskip("pytrec_eval")


def _random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(300)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(40):
        judged = rng.sample(docs, rng.randint(1, 25))
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        if not any(qrels[f"q{q}"].values()):
            qrels[f"q{q}"][judged[0]] = 1
        # Rankings that mix judged and unjudged documents, of varying depth.
        pool = judged + rng.sample(docs, 150)
        run[f"q{q}"] = list(dict.fromkeys(rng.sample(pool, rng.randint(5, len(pool)))))[:120]
    return qrels, run


def _trec(qrels: dict[str, dict[str, int]], run: dict[str, list[str]], depth: int | None = None):
    # Strictly decreasing scores keep trec_eval on our order (it re-sorts by score).
    scored = {q: {d: float(1000 - i) for i, d in enumerate(r[:depth])} for q, r in run.items()}
    measures = {"ndcg_cut.10", "recall.10,100", "recip_rank"}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(scored)


@pytest.mark.parametrize("seed", range(5))
def test_metrics_match_trec_eval(seed: int) -> None:
    qrels, run = _random_case(seed)
    full = _trec(qrels, run)
    top10 = _trec(qrels, run, depth=10)  # MRR@10 = trec_eval's recip_rank on the top 10
    for q, ranked in run.items():
        assert ndcg_at_k(ranked, qrels[q], 10) == pytest.approx(full[q]["ndcg_cut_10"], abs=1e-4)
        assert recall_at_k(ranked, qrels[q], 10) == pytest.approx(full[q]["recall_10"], abs=1e-4)
        assert recall_at_k(ranked, qrels[q], 100) == pytest.approx(full[q]["recall_100"], abs=1e-4)
        assert mrr_at_k(ranked, qrels[q], 10) == pytest.approx(top10[q]["recip_rank"], abs=1e-4)
    means = evaluate(run, qrels)
    expected = sum(full[q]["ndcg_cut_10"] for q in run) / len(run)
    assert means["ndcg@10"] == pytest.approx(expected, abs=1e-4)
