"""The `bench locomo` variants: mechanisms for session Recall@5 measured beside the shipped path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.search import Hit
from octobrain.models import Memory
from tests.test_ingest import LOCOMO


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


@pytest.mark.parametrize("variant", ["session-words", "window-vector"])
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


def test_a_missed_evidence_session_is_told_apart_by_the_legs_that_find_it() -> None:
    from octobrain.bench.locomo import _legs_found

    ranked = ["D2:1", "D1:1", "D4:1"]  # first two sessions: 2, 1
    evidence = ["D3:1", "D1:1", "D5:2"]  # session 1 found; 3 and 5 missed
    words, meaning = ["D3:4", "D5:1"], ["D3:1", "D9:9"]
    assert _legs_found(ranked, evidence, [words, meaning], k=2) == [2, 1]
    assert _legs_found(ranked, evidence, [["D9:1"], []], k=2) == [0, 0]
    assert _legs_found(ranked, ["D1:5"], [words, meaning], k=2) == []
