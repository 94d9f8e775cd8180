"""`octobrain bench bm25` end to end on a tiny BEIR directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from tests.test_beir import write_beir


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "beir")


def test_bench_bm25_json(beir_dir: Path) -> None:
    result = CliRunner().invoke(
        main, ["bench", "bm25", "--data", str(beir_dir), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["docs"], report["queries"]) == (4, 2)
    # q1 "apple": d1 and d3 both match; q2 "cherry blossoms": d4 first. Every query finds all
    # its relevant documents within 10, and the first hit of each query is relevant.
    assert report["recall_at_10"] == 1.0
    assert report["mrr_at_10"] == 1.0
    assert 0.0 < report["ndcg_at_10"] <= 1.0
    assert report["build_seconds"] >= 0.0 and report["query_p95_ms"] >= report["query_p50_ms"]


def test_bench_bm25_text_and_env(beir_dir: Path) -> None:
    result = CliRunner(env={"OCTOBRAIN_SCIFACT": str(beir_dir)}).invoke(
        main, ["bench", "bm25", "--no-stem", "--k1", "0.9", "--b", "0.4"]
    )
    assert result.exit_code == 0, result.output
    assert "nDCG@10" in result.stdout and "k1=0.9 b=0.4 stem=False" in result.stdout


def test_bench_bm25_reads_scifact_where_the_readme_says(
    tmp_path: Path, beir_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner(env={"OCTOBRAIN_SCIFACT": None})
    monkeypatch.chdir(tmp_path)  # no ../shared/data/scifact here
    result = runner.invoke(main, ["bench", "bm25"])
    assert result.exit_code == 2, result.output
    assert "--data: ../shared/data/scifact is not a directory" in result.output
    # Before: "--data is required" even with the data at the documented default.
    (tmp_path.parent / "shared" / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path.parent / "shared" / "data" / "scifact").symlink_to(beir_dir)
    result = runner.invoke(main, ["bench", "bm25", "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["docs"] == 4, result.output


def test_bench_bm25_errors_name_the_option(tmp_path: Path, beir_dir: Path) -> None:
    runner = CliRunner(env={"OCTOBRAIN_SCIFACT": None})
    result = runner.invoke(main, ["bench", "bm25", "--data", str(tmp_path)])
    assert result.exit_code == 2 and "--data" in result.output and "corpus.jsonl" in result.output
    result = runner.invoke(main, ["bench", "bm25", "--data", str(beir_dir), "--b", "2"])
    assert result.exit_code == 2 and "--b" in result.output


@pytest.mark.parametrize(
    ("command", "sizes", "rule"),
    [
        ("scale", "99999999999999999999", "each size must be between 2 and 1,000,000"),
        ("scale", "1000,1000001", "each size must be between 2 and 1,000,000"),
        ("scale", "1", "each size must be between 2 and 1,000,000"),
        ("cold", "99999999999999999999", "each size must be between 1 and 1,000,000"),
        ("scale", "10,1000,10", "each size once; 10 given more than once"),
        ("cold", "5000,5000", "each size once; 5,000 given more than once"),
    ],
)
def test_bench_sizes_have_a_stated_maximum(
    command: str, sizes: str, rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr("octobrain.bench.scale.run_scale", never)
    monkeypatch.setattr("octobrain.bench.cold.run_cold", never)
    result = CliRunner().invoke(main, ["bench", command, "--sizes", sizes])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: --sizes: {rule}"), result.stderr
    assert "1,000,000" in CliRunner().invoke(main, ["bench", command, "--help"]).output


@pytest.mark.parametrize("command", ["scale", "cold", "beir", "locomo"])
def test_a_readme_without_the_tables_markers_is_refused_before_the_benchmark_runs(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--update` was read only once the benchmark was done: minutes of `bench beir` or the
    # default `bench scale`, then "has no <!-- scale:start --> markers".
    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the benchmark ran")

    for module, runner in (("scale", "run_scale"), ("cold", "run_cold"), ("locomo", "run_locomo")):
        monkeypatch.setattr(f"octobrain.bench.{module}.{runner}", never)
    monkeypatch.setattr("octobrain.bench.beir.run_beir", never)
    readme = tmp_path / "README.md"
    readme.write_text("# Notes\n\nno tables here\n")
    result = CliRunner().invoke(main, ["bench", command, "--update", str(readme)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"error: update: {readme} has no <!-- {command}:start --> … <!-- {command}:end --> markers"
    ), result.stderr


@pytest.mark.parametrize("text", ["{}", "[]", '[{"sample_id": "x", "qa": []}]'])
def test_a_file_that_is_not_locomo_is_refused_and_the_readme_kept(
    text: str, tmp_path: Path
) -> None:
    # `{}` ran as "1 conversations, 0 turns, 0 questions", exit 0, and `--update` replaced the
    # README's LoCoMo table with an empty one.
    data = tmp_path / "bad.json"
    data.write_text(text)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- locomo:start -->\n| the published table |\n<!-- locomo:end -->\n")
    before = readme.read_text()
    result = CliRunner().invoke(
        main, ["bench", "locomo", "--data", str(data), "--update", str(readme)]
    )
    assert result.exit_code == 2, result.output
    assert "error: --data: " in result.stderr and "not LoCoMo data" in result.stderr
    assert readme.read_text() == before
