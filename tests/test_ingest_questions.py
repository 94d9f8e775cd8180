"""Recall over ingested conversations: question dates read as calendar periods, a date or a
person in a question preferred; `bench locomo` scores and its data files."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from octobrain.memory.conversation import parse_text
from tests.ingest_support import LOCOMO, brain, cli


def test_question_dates_are_read_as_calendar_periods() -> None:
    from octobrain.memory.query import Period, named_periods

    day = Period(2023, 6, 3)
    for text in (
        "What did Maria start, as mentioned on 3 June, 2023?",
        "What happened on June 3rd 2023?",
        "the 3rd of June 2023",
        "any news from 2023-06-03",
    ):
        assert named_periods([text]) == [day], text  # the day only, not also its month
    assert named_periods(["What did Joanna finish in January 2022?"]) == [Period(2022, 1)]
    assert named_periods(["Where did Joanna go in May?"]) == [Period(None, 5)]
    assert named_periods(["What happened during 2021?"]) == [Period(2021)]
    # "may" the verb, a day that no month has and a bare number are not dates
    assert named_periods(["What may Joanna do on June 45 at 2022 o'clock?"]) == []
    assert named_periods(["in May", "between May 1 and May 3 2023"]) == [
        Period(None, 5),
        Period(None, 5, 1),
        Period(2023, 5, 3),
    ]
    moment = datetime(2023, 6, 3, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert Period(2023, 6, 4).holds(moment) and not day.holds(moment)  # compared in UTC


def test_a_question_naming_a_date_prefers_what_was_said_then(tmp_path: Path) -> None:
    records = [
        {
            "speaker": "Ana",
            "text": "We adopted a kitten at the shelter.",
            "time": "2023-06-03T10:00:00Z",
        },
        {
            "speaker": "Ana",
            "text": "We adopted a kitten at the shelter.",
            "time": "2023-09-20T10:00:00Z",
        },
    ]
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    for question, day in (
        ("What did Ana adopt on 3 June, 2023?", 3),
        ("What did Ana adopt in September 2023?", 20),
    ):
        top, second = b.remember(question, min_relevance=0.0).hits
        assert top.memory.created_at.day == day, question
        assert "from the date the question names" in top.why
        assert "from the date the question names" not in second.why
    hits = b.remember("What did Ana adopt at the shelter?", min_relevance=0.0).hits
    assert all("the date the question names" not in h.why for h in hits)


def test_a_question_naming_a_person_prefers_that_persons_turns(tmp_path: Path) -> None:
    records = [
        {"speaker": "Ana", "text": "I adopted a cat from the shelter last week."},
        {"speaker": "Bo", "text": "I adopted a cat from the shelter last week too!"},
    ]
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    for name, other in (("Ana", "bo"), ("Bo", "ana")):
        (top, second) = b.remember(f"Which cat did {name} adopt?", min_relevance=0.0).hits
        assert f"speaker:{name.lower()}" in top.memory.tags
        assert "said by the person the question names" in top.why
        assert f"speaker:{other}" in second.memory.tags
        assert "said by someone else than the person the question names" in second.why
        # Still returned, but it answers the question asked about another person at half
        # the relevance its words and meaning matched: the best relevance is the named one's.
        found = re.search(r"relevance (\d\.\d+) matched", second.why)
        assert found is not None, second.why
        matched = float(found[1])
        assert second.relevance == pytest.approx(matched / 2, abs=0.01)
        assert second.relevance < top.relevance / 1.5
    unnamed = b.remember("Who adopted a cat from the shelter?", min_relevance=0.0).hits
    assert all("the person the question names" not in h.why for h in unnamed)
    assert abs(unnamed[0].relevance - unnamed[1].relevance) < 0.2  # the same words, either said


def test_bench_locomo_scores_evidence_turns_and_sessions(tmp_path: Path) -> None:
    from octobrain.bench.locomo import first_sessions, locomo_table, run_locomo, session_recall

    assert session_recall(["D2:1", "D2:2", "D1:3"], ["D1:3", "D3:1"], k=2) == 0.5
    assert first_sessions(["D2:1", "D2:2", "D1:3", "D4:1"], k=2) == {"2", "1"}
    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [
        {"question": "Which class did Caroline join?", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Melanie photograph?", "evidence": ["D2:1; D2:2"], "category": 1},
        {"question": "Which car did Caroline buy?", "evidence": [], "category": 5},
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(sample))
    report = run_locomo(tmp_path, model="hash:256", cache_dir=tmp_path / "cache").as_dict()
    assert (report["turns"], report["questions"]) == (5, 2)
    assert report["categories"]["single-hop"]["recall_at_5"] == 1.0
    assert report["overall"]["session_recall_at_5"] == 1.0
    assert report["overall"]["session_all_at_5"] == report["overall"]["session_any_at_5"] == 1.0
    adversarial = report["adversarial"]
    assert adversarial["questions"] == 1.0 and adversarial["threshold"] == 0.3
    assert 0.0 <= adversarial["auc"] <= 1.0 and "auc_half_A" in adversarial
    table = locomo_table(report)
    assert "| **all** | 2 |" in table and "Adversarial questions (1):" in table
    assert "at the default threshold (relevance ≥ 0.3)" in table and "AUC" in table
    assert "| session Recall@5 | all@5 | any@5 |" in table
    assert "| 1.000 | 1.000 | 1.000 |" in table.split("| **all** |", 1)[1].splitlines()[0]


def test_auc_is_the_chance_an_answerable_question_outscores_an_adversarial_one() -> None:
    from octobrain.bench.locomo import auc

    assert auc([0.9, 0.8], [0.1, 0.8]) == 0.875  # one tie of four pairs counts half
    assert auc([0.2], [0.5, 0.6]) == 0.0 and auc([], [0.5]) == 0.0


def test_bench_locomo_without_the_data_names_the_option(tmp_path: Path) -> None:
    result = cli("bench", "locomo", "--data", str(tmp_path))
    assert result.exit_code == 2
    assert "--data" in result.output and "locomo-dev.json.gz" in result.output
    assert "Traceback" not in result.output


def test_bench_locomo_reads_a_held_out_file_by_any_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.bench.locomo_data import load_locomo

    held_out = tmp_path / "locomo-test"
    held_out.mkdir()
    (held_out / "README.md").write_text("the other half")
    (held_out / "queries.jsonl.gz").write_bytes(b"")  # the BEIR layout beside it is not read
    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [{"question": "Which class?", "evidence": ["D1:1"], "category": 4}]
    with gzip.open(held_out / "locomo-test.json.gz", "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(sample))
    conversations, questions = load_locomo(held_out)
    assert [len(c.turns) for c in conversations] == [5]
    assert [q.text for q in questions] == ["Which class?"]
    assert load_locomo(held_out / "locomo-test.json.gz")[1] == questions  # the file itself

    (held_out / "locomo-extra.json").write_text(json.dumps(LOCOMO))
    monkeypatch.setenv("OCTOBRAIN_LOCOMO", str(held_out))  # as --data
    result = cli("bench", "locomo")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "locomo-extra.json, locomo-test.json.gz" in result.output and "name one" in result.output
