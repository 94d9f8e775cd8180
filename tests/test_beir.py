"""BEIR loader and trec_eval-style metrics, checked against hand-computed values."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.bench.datasets import evaluate, load_beir, mrr_at_k, ndcg_at_k, recall_at_k
from octobrain.cli.main import main
from octobrain.errors import InvalidInput


def write_beir(root: Path, *, gz: bool = False) -> Path:
    """A 4-document BEIR directory: q1 judges d1 and d3, q2 judges d4, q3 judges nothing."""
    corpus = [
        {"_id": "d1", "title": "Apple pie", "text": "A recipe for apple pie."},
        {"_id": "d2", "title": "", "text": "Bananas grow in bunches."},
        {"_id": "d3", "title": "Orchards", "text": "Apple trees in orchards."},
        {"_id": "d4", "title": "Cherries", "text": "Cherry blossom season."},
    ]
    queries = [
        {"_id": "q1", "text": "apple"},
        {"_id": "q2", "text": "cherry blossoms"},
        {"_id": "q3", "text": "bananas"},
    ]
    (root / "qrels").mkdir(parents=True)
    for name, rows in (("corpus", corpus), ("queries", queries)):
        lines = "".join(json.dumps(row) + "\n" for row in rows)
        if gz:
            with gzip.open(root / f"{name}.jsonl.gz", "wt", encoding="utf-8") as f:
                f.write(lines)
        else:
            (root / f"{name}.jsonl").write_text(lines, encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t2\nq2\td4\t1\nq3\td2\t0\n",
        encoding="utf-8",
    )
    return root


@pytest.mark.parametrize("gz", [False, True])
def test_load_beir(tmp_path: Path, gz: bool) -> None:
    data = load_beir(write_beir(tmp_path, gz=gz))
    assert data.doc_ids == ["d1", "d2", "d3", "d4"]
    assert data.doc_texts[0] == "Apple pie. A recipe for apple pie."
    assert data.doc_texts[1] == "Bananas grow in bunches."  # no title: text only
    assert data.query_ids == ["q1", "q2"]  # q3 has no relevant document
    assert data.qrels["q1"] == {"d1": 1, "d3": 2}


def test_load_beir_errors_name_data(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"^data: .* is not a directory"):
        load_beir(tmp_path / "missing")
    with pytest.raises(InvalidInput, match=r"^data: .* has no corpus.jsonl"):
        load_beir(tmp_path)


def test_a_held_out_split_is_read_by_its_name_or_as_the_only_one(tmp_path: Path) -> None:
    root = write_beir(tmp_path)
    (root / "qrels" / "test.tsv").rename(root / "qrels" / "train.tsv")
    assert load_beir(root).split == "train"  # the only split there
    assert load_beir(root).query_ids == ["q1", "q2"]
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td2\t1\n")
    with pytest.raises(InvalidInput, match=r"^split: .* holds no test.tsv but dev, train"):
        load_beir(root)
    assert load_beir(root, "dev").query_ids == ["q3"]
    with pytest.raises(InvalidInput, match=r"^split: .*test.tsv not found \(splits: dev, train\)"):
        load_beir(root, "test")
    result = CliRunner().invoke(main, ["bench", "bm25", "--data", str(root), "--split", "dev"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["bench", "bm25", "--data", str(root)])
    assert result.exit_code == 2 and "--split" in result.output and "Traceback" not in result.output


def test_ndcg_by_hand() -> None:
    judgments = {"a": 2, "b": 1, "z": 0}
    # DCG = 1/log2(2) [b at rank 1] + 2/log2(4) [a at rank 3] = 1 + 1 = 2
    # IDCG = 2/log2(2) + 1/log2(3)
    expected = 2.0 / (2.0 + 1.0 / math.log2(3))
    assert ndcg_at_k(["b", "x", "a"], judgments, 10) == pytest.approx(expected)
    assert ndcg_at_k(["a", "b"], judgments, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "b", "a"], judgments, 1) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0


def test_recall_and_mrr_by_hand() -> None:
    judgments = {"a": 1, "b": 1, "c": 1, "n": 0}
    assert recall_at_k(["x", "a", "n", "c"], judgments, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["x", "a", "n", "c"], judgments, 100) == pytest.approx(2 / 3)
    assert mrr_at_k(["n", "x", "c"], judgments, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["n", "x", "c"], judgments, 2) == 0.0


def test_evaluate_averages_judged_queries() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    scores = evaluate({"q1": ["a"], "q3": ["c"]}, qrels)  # q2 has no run: counts as 0
    assert scores == {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5}
    with pytest.raises(InvalidInput, match=r"^qrels: "):
        evaluate({}, {"q": {"a": 0}})
