"""The `bench locomo` variants: mechanisms for session Recall@5 measured beside the shipped path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from octobrain.bench.locomo_variants import VARIANTS
from octobrain.errors import InvalidInput
from octobrain.memory.search import Hit
from octobrain.models import Memory
from tests.ingest_support import LOCOMO


def _hit(name: str, score: float) -> Hit:
    return Hit(Memory(name, name, id=name), score, 0.5, 0.5, "")


def test_a_variant_leg_reorders_the_returned_turns() -> None:
    from octobrain.bench.locomo_variants import rerank

    hits = [_hit("a", 1.0), _hit("b", 0.9), _hit("c", 0.8)]
    # z of the leg: c +1.41, a and b -0.71; half of it added to log(score) puts c first.
    assert [h.memory.id for h in rerank(hits, [0.0, 0.0, 10.0])] == ["c", "a", "b"]
    assert [h.memory.id for h in rerank(hits, [1.0, 1.0, 1.0])] == ["a", "b", "c"]
    assert rerank([], []) == []


def test_session_words_score_a_turn_by_its_whole_session() -> None:
    from octobrain.bench.locomo_variants import SessionWords
    from octobrain.memory.conversation import parse_text

    (conv,) = parse_text(json.dumps(LOCOMO), "locomo")
    scores = SessionWords(conv).scores("Where is the pottery class?", ["D1:2", "D2:1", "D9:9"])
    assert scores[0] > 0.0  # "Wow! How was it?" is in the session about pottery
    assert scores[1:] == [0.0, 0.0]


@pytest.mark.parametrize("variant", VARIANTS)
def test_bench_locomo_runs_each_variant(tmp_path: Path, variant: str) -> None:
    from octobrain.bench.locomo import locomo_table, run_locomo

    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [
        {
            "question": "Which class did Caroline and Melanie join?",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {"question": "Which car did Caroline buy?", "evidence": [], "category": 5},
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(sample))
    report = run_locomo(
        tmp_path, model="hash:256", cache_dir=tmp_path / "cache", variant=variant
    ).as_dict()
    assert report["variant"] == variant and report["questions"] == 1
    assert report["overall"]["recall_at_5"] == 1.0
    assert f"variant `{variant}`" in locomo_table(report)


def test_bench_locomo_offers_every_variant() -> None:
    from octobrain.cli.bench import bench_locomo_command

    (option,) = [p for p in bench_locomo_command.params if p.name == "variant"]
    assert tuple(option.type.choices) == VARIANTS  # type: ignore[attr-defined]


def test_missed_sessions_say_how_far_each_evidence_session_ranked() -> None:
    from octobrain.bench.locomo import missed_sessions

    ranked = [f"D{s}:1" for s in range(1, 13)]  # sessions 1..12, one turn each
    evidence = ["D1:2", "D7:3", "D12:1", "D20:4"]
    assert missed_sessions(ranked, evidence) == ["6-10", "11+", "absent"]
    assert missed_sessions(ranked, ["D2:5", "D3:1"]) == []


def test_bench_locomo_names_an_unknown_variant(tmp_path: Path) -> None:
    from octobrain.bench.locomo import run_locomo

    (tmp_path / "locomo10.json").write_text(json.dumps(LOCOMO))
    with pytest.raises(InvalidInput) as err:
        run_locomo(tmp_path, model="hash:256", cache_dir=tmp_path / "cache", variant="magic")
    assert err.value.field == "variant"


def test_a_missed_evidence_session_is_told_apart_by_the_legs_that_find_it() -> None:
    from octobrain.bench.locomo import _legs_found

    ranked = ["D2:1", "D1:1", "D4:1"]  # first two sessions: 2, 1
    evidence = ["D3:1", "D1:1", "D5:2"]  # session 1 found; 3 and 5 missed
    words, meaning = ["D3:4", "D5:1"], ["D3:1", "D9:9"]
    assert _legs_found(ranked, evidence, [words, meaning], k=2) == [2, 1]
    assert _legs_found(ranked, evidence, [["D9:1"], []], k=2) == [0, 0]
    assert _legs_found(ranked, ["D1:5"], [words, meaning], k=2) == []


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What have Caroline and Melanie both painted?",
            ["What have Caroline painted?", "What have Melanie painted?"],
        ),
        (
            "What did John buy, sell and trade?",
            ["What did John buy?", "What did John sell?", "What did John trade?"],
        ),
        (
            "Would she rather visit a national park or a theme park?",
            ["Would she rather visit a national park?", "Would she rather visit a theme park?"],
        ),
        (
            "What pottery have Mel and her kids made?",
            ["What pottery have Mel made?", "What pottery have her kids made?"],
        ),
        (
            "Which school did he go to and how long did he stay?",
            ["Which school did he go to?", "How long did he stay?"],
        ),
        ("What charity would he work with and why?", []),  # "why?" alone asks nothing
        ("What does Tim collect?", []),
        ("And what now?", []),
    ],
)
def test_a_question_coordinating_things_is_asked_once_per_part(
    question: str, parts: list[str]
) -> None:
    from octobrain.bench.locomo_variants import decompose

    assert decompose(question) == parts


def test_interleaved_rankings_give_each_part_its_best_turns_first() -> None:
    from octobrain.bench.locomo_variants import interleave

    first = [_hit("a", 1.0), _hit("b", 0.9), _hit("c", 0.8)]
    second = [_hit("x", 1.0), _hit("a", 0.9), _hit("y", 0.8)]
    second[1].relevance = 0.9
    merged = interleave([first, second])
    assert [h.memory.id for h in merged] == ["a", "x", "b", "c", "y"]
    assert merged[0].relevance == 0.9  # the best relevance any part gave it
    assert first[0].relevance == 0.5  # the parts' own hits are left as they were


def test_dense_feedback_moves_the_query_towards_its_top_turns(tmp_path: Path) -> None:
    from octobrain.bench.locomo_variants import FEEDBACK_BETA, FeedbackEmbedder, relevance_of
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    embedder = FeedbackEmbedder(get_embedder("hash:256"))
    brain = Brain("fb", embedder=embedder, uri=tmp_path)
    for text in ("pottery class on Monday", "the kiln fired my bowls", "a sunrise over the lake"):
        brain.memorize(text, text)
    question = "How was the pottery class?"
    query = embedder.embed_query(question)
    hits = brain.remember(question, limit=1, min_relevance=0.0, record_access=False).hits
    corpus = brain.retriever.corpus
    embedder.feedback(question, corpus, hits)
    moved = embedder.embed_query(question)
    top = corpus.vectors[corpus.positions_of([hits[0].memory.id])][0]
    expected = query + FEEDBACK_BETA * top
    assert np.allclose(moved, expected / np.linalg.norm(expected), atol=1e-6)
    assert float(moved @ top) > float(query @ top)
    again = brain.remember(question, limit=3, min_relevance=0.0, record_access=False).hits
    embedder.forget(question)
    assert np.array_equal(embedder.embed_query(question), query)
    # Relevance stays that of the question's own vector, whatever ranked the turns.
    honest = relevance_of(question, query, corpus, again)
    for hit in honest:
        pos = corpus.positions_of([hit.memory.id])
        assert hit.cosine == pytest.approx(float(corpus.vectors[pos][0] @ query), abs=1e-6)
        assert hit.relevance >= max(0.0, hit.cosine)


def test_the_speakers_names_leave_a_question_for_the_vector_leg() -> None:
    from octobrain.bench.locomo_variants import without_names

    names = ["Caroline", "Mel", "Melanie"]
    assert (
        without_names("What did Caroline realize after Melanie's charity race?", names)
        == "What did realize after charity race?"
    )
    assert without_names("Is Melody Caroline's cousin?", names) == "Is Melody cousin?"
    assert without_names("Caroline?", names) == "Caroline?"  # nothing else left: as asked


class _WordVectors:
    """Vectors for a few words on known axes; any other word gets an axis of its own."""

    def __init__(self) -> None:
        self.axes: dict[str, list[float]] = {
            "outdoor": [1.0, 0.0],
            "hiking": [0.9, 0.44],
            "outdoors": [0.95, 0.31],
        }

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(64, dtype=np.float32)
        known = self.axes.get(text)
        if known is None:
            v[2 + len(self.axes)] = 1.0
            self.axes[text] = list(v)
        else:
            v[: len(known)] = known
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def test_word_neighbours_add_the_conversations_related_words_at_half_weight() -> None:
    from octobrain.bench.locomo_variants import WordNeighbours
    from octobrain.memory.turns import Conversation, Turn

    said = "I went hiking outdoors, then pottery with Caroline at the lake"
    conv = Conversation("c", [Turn("Caroline", said, session="1", key="D1:1")])
    expand = WordNeighbours(_WordVectors(), [conv])  # type: ignore[arg-type]
    asked = "What outdoor things did Caroline do?"
    # "hiking" (cosine 0.9) is added once; "outdoors" is the question's own word (same stem),
    # "pottery" is unrelated, and a speaker's name or a closed-class word brings nothing.
    assert expand(asked) == f"{asked} {asked} hiking"
    assert expand("Caroline?") == "Caroline? Caroline?"
