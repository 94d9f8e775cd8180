"""`search.feedback` (RM3 on the words leg, off by default) and the `bench locomo` variants."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from octobrain.config import Config, EmbeddingConfig, FeedbackConfig
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.search import Hit
from octobrain.models import Memory
from tests.test_ingest import LOCOMO

SCOPE = "github.com/acme/bakery"
NOTES = [
    ("Sourdough starter", "Feed the sourdough starter with rye flour every morning."),
    ("Rye flour", "The mill delivers rye flour on Tuesdays, order two sacks."),
    ("Garage", "Keep the garage door locked at night."),
    ("Plants", "Water the plants twice a week in July."),
    ("Printer", "Keep spare toner for the office printer."),
]
QUESTION = "How do I keep the sourdough starter alive?"


def bakery(
    tmp_path: Path, *, feedback: bool, ann_min_rows: int = 0, candidates: int = 100
) -> Brain:
    config = Config(embedding=EmbeddingConfig(model="hash:256"))
    search = replace(
        config.search,
        feedback=FeedbackConfig(enabled=feedback, docs=1),
        ann_min_rows=ann_min_rows,
        candidates=candidates,
    )
    b = Brain(SCOPE, config=replace(config, search=search), uri=tmp_path / "db")
    for title, content in NOTES:
        b.memorize(title, content)
    return b


def test_feedback_is_off_by_default() -> None:
    assert Config().search.feedback.enabled is False


def test_feedback_finds_what_the_best_match_talks_about_without_changing_relevance(
    tmp_path: Path,
) -> None:
    plain = bakery(tmp_path / "plain", feedback=False)
    expanded = bakery(tmp_path / "expanded", feedback=True)
    before = plain.remember(QUESTION, limit=5, min_relevance=0.0).hits
    after = expanded.remember(QUESTION, limit=5, min_relevance=0.0).hits
    titles = [[h.memory.title for h in hits] for hits in (before, after)]
    # The supplier note shares no word with the question, only "rye flour" with its best match:
    # without feedback both notes sharing "keep" rank above it, with feedback it passes one.
    assert titles[0][0] == titles[1][0] == "Sourdough starter"
    assert titles[0].index("Rye flour") > titles[0].index("Printer")
    assert titles[1].index("Rye flour") < titles[1].index("Printer")
    assert "feedback #" in after[titles[1].index("Rye flour")].why
    # What the question itself matches decides relevance, with or without the expansion.
    relevance = [{h.memory.title: h.relevance for h in hits} for hits in (before, after)]
    assert relevance[0] == pytest.approx(relevance[1])


def test_feedback_ranks_the_same_past_the_ann_threshold(tmp_path: Path) -> None:
    # Past `ann_min_rows` only the legs' candidates get a cosine: those the expansion alone
    # finds (two per leg here) get theirs before they are fused.
    exact = bakery(tmp_path / "exact", feedback=True, candidates=2)
    ann = bakery(tmp_path / "ann", feedback=True, ann_min_rows=1, candidates=2)
    exact_hits = exact.remember(QUESTION, min_relevance=0.0).hits
    ann_hits = ann.remember(QUESTION, min_relevance=0.0).hits
    assert any("feedback #" in h.why and "vector" not in h.why for h in ann_hits)
    assert [h.memory.title for h in ann_hits] == [h.memory.title for h in exact_hits]
    assert [h.cosine for h in ann_hits] == pytest.approx([h.cosine for h in exact_hits])


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


@pytest.mark.parametrize("variant", ["feedback", "session-words", "window-vector"])
def test_bench_locomo_runs_each_variant(tmp_path: Path, variant: str) -> None:
    from octobrain.bench.locomo import locomo_table, run_locomo

    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [
        {"question": "Which class did Caroline join?", "evidence": ["D1:1"], "category": 4},
        {"question": "Which car did Caroline buy?", "evidence": [], "category": 5},
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(sample))
    report = run_locomo(
        tmp_path, model="hash:256", cache_dir=tmp_path / "cache", variant=variant
    ).as_dict()
    assert report["variant"] == variant and report["questions"] == 1
    assert report["overall"]["recall_at_5"] == 1.0
    assert f"variant `{variant}`" in locomo_table(report)


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
