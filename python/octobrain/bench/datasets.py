"""A small BEIR dataset loader and the trec_eval definitions of nDCG, Recall and MRR.

Layout (standard BEIR): ``corpus.jsonl[.gz]``, ``queries.jsonl[.gz]``, ``qrels/<split>.tsv``.
A document's text is ``"{title}. {text}"`` (just ``text`` when the title is empty): the title
carries the key terms, and the period keeps it a separate phrase. Only queries with at least
one judged-relevant document (grade > 0) in the split's qrels are kept, in file order.

Metrics follow trec_eval: linear gains (the qrels grade) with a log2(rank + 1) discount and
the ideal ranking built from the qrels; Recall@k = relevant found in the top k / all relevant;
MRR@k = 1 / rank of the first relevant document within the top k (0 if none). A ranking is
taken as given (trec_eval would re-sort equal scores by document id).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from octobrain.errors import InvalidInput
from octobrain.files import named_by, open_regular

__all__ = [
    "BeirDataset",
    "evaluate",
    "load_beir",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]

Qrels = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True)
class BeirDataset:
    """A loaded BEIR split: documents and queries in file order, and graded judgments."""

    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]
    doc_titles: list[str] = field(default_factory=list)  # title and text apart, for ingesting
    doc_bodies: list[str] = field(default_factory=list)
    split: str = "test"  # the qrels file read: qrels/<split>.tsv


def _jsonl(directory: Path, stem: str) -> Iterator[dict[str, object]]:
    for name in (f"{stem}.jsonl", f"{stem}.jsonl.gz"):
        path = directory / name
        if path.exists():
            yield from _records(path)
            return
    raise InvalidInput("data", f"{directory} has no {stem}.jsonl or {stem}.jsonl.gz")


@contextmanager
def _text(path: Path) -> Iterator[Iterator[str]]:
    """The lines of a dataset file (gzip inflated when it is gzip); a file that is
    not a regular one, cannot be read or inflated, or is not UTF-8, refused naming `data`."""
    with named_by("data", path, "is a directory, not a dataset file"):
        handle, _ = open_regular(path)
    with handle:
        packed = handle.read(2) == b"\x1f\x8b"  # (by its bytes: a name can be wrong)
        handle.seek(0)
        raw: BinaryIO | gzip.GzipFile = gzip.GzipFile(fileobj=handle) if packed else handle
        try:
            yield io.TextIOWrapper(raw, encoding="utf-8", newline="")
        except UnicodeDecodeError:
            raise InvalidInput("data", f"{path} is not UTF-8 text") from None
        except (OSError, EOFError, zlib.error) as exc:  # (gzip.BadGzipFile is an OSError)
            why = "it ends before its data does" if isinstance(exc, EOFError) else exc
            raise InvalidInput("data", f"{path} cannot be read ({why})") from None


def _records(path: Path) -> Iterator[dict[str, object]]:
    """The objects of a JSON-lines file, each with an `_id`; a line that is not one is
    refused naming the file and the line."""
    with _text(path) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(
                    "data", f"{path} line {number} is not JSON ({exc.msg})"
                ) from None
            if not isinstance(record, dict) or not isinstance(record.get("_id"), (str, int)):
                raise InvalidInput("data", f"{path} line {number}: must be an object with an _id")
            yield record


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.exists():
        raise InvalidInput("data", f"qrels file {path} not found")
    qrels: dict[str, dict[str, int]] = {}
    with _text(path) as lines:
        for row in csv.reader(lines, delimiter="\t"):
            if len(row) < 3:
                continue
            query_id, doc_id, grade = row[0], row[1], row[-1]
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(grade)
            except ValueError:  # the header line
                continue
    return qrels


def qrels_split(root: Path, split: str | None = None) -> str:
    """The split whose judgments are read: `split` when given, else `test`, else the one
    split `qrels/` holds (a held-out copy with only `qrels/train.tsv`). A split that is not
    there, or a choice among several, is an error naming the splits there are."""
    folder = root / "qrels"
    there = sorted(p.stem for p in folder.glob("*.tsv") if p.is_file()) if folder.is_dir() else []
    listed = ", ".join(there) or "none"
    if split is not None:
        if split not in there:
            raise InvalidInput("split", f"{folder / (split + '.tsv')} not found (splits: {listed})")
        return split
    if "test" in there or not there:
        return "test"  # none at all: reading it names the file that is missing
    if len(there) == 1:
        return there[0]
    raise InvalidInput("split", f"{folder} holds no test.tsv but {listed}: choose one")


def load_beir(directory: str | Path, split: str | None = None) -> BeirDataset:
    """Load a BEIR dataset directory (see the module docstring for the layout); `split` as
    `qrels_split` chooses it."""
    root = Path(directory)
    if not root.is_dir():
        raise InvalidInput("data", f"{root} is not a directory")
    split = qrels_split(root, split)
    doc_ids: list[str] = []
    doc_texts: list[str] = []
    titles: list[str] = []
    bodies: list[str] = []
    for doc in _jsonl(root, "corpus"):
        title, text = str(doc.get("title") or "").strip(), str(doc.get("text") or "")
        doc_ids.append(str(doc["_id"]))
        doc_texts.append(f"{title}. {text}" if title else text)
        titles.append(title)
        bodies.append(text)
    qrels = _read_qrels(root / "qrels" / f"{split}.tsv")
    judged = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    query_ids: list[str] = []
    query_texts: list[str] = []
    for query in _jsonl(root, "queries"):
        if str(query["_id"]) in judged:
            if not isinstance(query.get("text"), str):
                raise InvalidInput("data", f"query {query['_id']} in {root}: must have a text")
            query_ids.append(str(query["_id"]))
            query_texts.append(str(query["text"]))
    if not query_ids:  # (every metric would divide by no query)
        raise InvalidInput(
            "data",
            f"{root}: no query of its queries file has a document judged relevant in "
            f"qrels/{split}.tsv",
        )
    return BeirDataset(doc_ids, doc_texts, query_ids, query_texts, qrels, titles, bodies, split)


def ndcg_at_k(ranked: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains and log2 discount; 0 when nothing is relevant."""
    dcg = sum(
        max(judgments.get(doc, 0), 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k])
    )
    ideal_gains = sorted((g for g in judgments.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal_gains))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at_k(ranked: Sequence[str], judgments: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k; 0 when nothing is relevant."""
    relevant = {doc for doc, g in judgments.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judgments: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top k (0 if none)."""
    for rank, doc in enumerate(ranked[:k]):
        if judgments.get(doc, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


def evaluate(run: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@10, Recall@100 and MRR@10 over the queries of `qrels` that have
    a relevant document; a query missing from `run` scores 0."""
    queries = [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]
    if not queries:
        raise InvalidInput("qrels", "no query has a relevant document")
    totals = {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for q in queries:
        ranked, judgments = run.get(q, []), qrels[q]
        totals["ndcg@10"] += ndcg_at_k(ranked, judgments, 10)
        totals["recall@10"] += recall_at_k(ranked, judgments, 10)
        totals["recall@100"] += recall_at_k(ranked, judgments, 100)
        totals["mrr@10"] += mrr_at_k(ranked, judgments, 10)
    return {name: total / len(queries) for name, total in totals.items()}
