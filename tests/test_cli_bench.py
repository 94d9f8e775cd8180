"""`octobrain bench …` option checks, and `bench bm25` end to end on a tiny BEIR directory."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from tests.ingest_support import LOCOMO
from tests.test_beir import write_beir


def _never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the benchmark ran")


@pytest.fixture
def no_benchmark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bench command's runner replaced by one that fails the test if it is reached."""
    for module, runner in (("scale", "run_scale"), ("cold", "run_cold"), ("locomo", "run_locomo")):
        monkeypatch.setattr(f"octobrain.bench.{module}.{runner}", _never)
    monkeypatch.setattr("octobrain.bench.beir.run_beir", _never)


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
@pytest.mark.usefixtures("no_benchmark")
def test_bench_sizes_have_a_stated_maximum(command: str, sizes: str, rule: str) -> None:
    result = CliRunner().invoke(main, ["bench", command, "--sizes", sizes])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: --sizes: {rule}"), result.stderr
    assert "1,000,000" in CliRunner().invoke(main, ["bench", command, "--help"]).output


@pytest.mark.parametrize("command", ["scale", "cold", "beir", "locomo"])
@pytest.mark.usefixtures("no_benchmark")
def test_a_readme_without_the_tables_markers_is_refused_before_the_benchmark_runs(
    command: str, tmp_path: Path
) -> None:
    # `--update` was read only once the benchmark was done: minutes of `bench beir` or the
    # default `bench scale`, then "has no <!-- scale:start --> markers".
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


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (
            "<!-- beir:start -->\nold\n<!-- beir:end -->\n<!-- beir:start -->\nstale\n"
            "<!-- beir:end -->\n",
            "has <!-- beir:start --> on 2 lines; keep one pair of markers",
        ),
        ("<!-- beir:end -->\nprose\n<!-- beir:start -->\n", "has <!-- beir:end --> before"),
        ("Quoted: `<!-- beir:start -->` … `<!-- beir:end -->`.\n", "has no <!-- beir:start -->"),
    ],
)
@pytest.mark.usefixtures("no_benchmark")
def test_a_readme_whose_markers_are_twice_or_out_of_order_is_refused_before_the_run(
    text: str, rule: str, tmp_path: Path
) -> None:
    # A second pair kept its stale table silently; markers quoted in prose were taken for the
    # table's, and the table written into the middle of that line.
    readme = tmp_path / "README.md"
    readme.write_text(text)
    result = CliRunner().invoke(main, ["bench", "beir", "--update", str(readme)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: update: {readme} {rule}"), result.stderr
    assert readme.read_text() == text


def _outside(text: str) -> tuple[str, str]:
    head, _, rest = text.partition("<!-- beir:start -->\n")
    return head, rest.partition("<!-- beir:end -->")[2]


def test_update_twice_rewrites_only_the_table_between_its_marker_lines(
    beir_dir: Path, tmp_path: Path
) -> None:
    prose = "The table between `<!-- beir:start -->` and `<!-- beir:end -->` is generated.\n"
    text = f"# Title\n{prose}\n<!-- beir:start -->\nold table\n<!-- beir:end -->\n\nmore {prose}"
    readme = tmp_path / "README.md"
    readme.write_text(text)
    args = ["bench", "beir", "--data", str(beir_dir), "--model", "hash:64", "--modes", "bm25"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--update", str(readme)]
    tables = []
    for _ in range(2):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        now = readme.read_text()
        assert _outside(now) == _outside(text)  # the prose quoting the markers kept as it was
        assert now.count("<!-- beir:start -->\n") == 1 and "old table" not in now
        tables.append(now.partition("<!-- beir:start -->\n")[2].partition("<!-- beir:end -->")[0])
    assert "| bm25 | 0.930 |" in tables[0]
    assert len(tables[0].splitlines()) == len(tables[1].splitlines())  # only numbers changed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "beir", "cache"]


def test_a_readme_write_that_fails_leaves_the_readme_whole(beir_dir: Path, tmp_path: Path) -> None:
    # The README was written in place: a table it could not encode (a data dir whose name is
    # not UTF-8) truncated it to nothing, with a traceback.
    data = tmp_path / os.fsdecode(b"beir-\xff")
    beir_dir.rename(data)
    readme = tmp_path / "README.md"
    readme.write_text("top\n<!-- beir:start -->\nold\n<!-- beir:end -->\nbottom\n")
    before = readme.read_text()
    args = ["bench", "beir", "--data", str(data), "--model", "hash:64", "--modes", "bm25"]
    result = CliRunner().invoke(main, [*args, "--update", str(readme), "--format", "json"])
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == (
        "error: update: must be valid Unicode; nothing written; the report is on standard output"
    )
    assert json.loads(result.stdout)["docs"] == 4  # the report is not lost
    assert readme.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", data.name]


def test_an_interrupted_write_leaves_the_old_file_and_no_partial_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.files import write_atomic_file

    target = tmp_path / "README.md"
    target.write_text("old")

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("octobrain.files.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic_file(target, "new", "update")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]  # (no .README.md.<pid>.tmp)


@pytest.mark.parametrize("command", ["scale", "cold", "beir", "locomo"])
@pytest.mark.parametrize("where", ["a-file/out.json", "fifo"])
@pytest.mark.usefixtures("no_benchmark")
def test_an_output_that_cannot_be_written_is_refused_before_the_benchmark_runs(
    command: str, where: str, tmp_path: Path
) -> None:
    # `--output` was written only once the benchmark was done: minutes later a traceback
    # (FileExistsError from making a file's "folder") and the results lost.
    (tmp_path / "a-file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    output = tmp_path / where
    expected = {
        "a-file/out.json": f"{tmp_path / 'a-file'} is not a directory",
        "fifo": f"{output} is not a regular file",
    }[where]
    result = CliRunner().invoke(main, ["bench", command, "--output", str(output)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: output: {expected}"), result.stderr


def _locomo_text() -> str:
    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [{"question": "Which class?", "evidence": ["D1:1"], "category": 4}]
    return json.dumps(sample)


@pytest.mark.parametrize(
    ("name", "content", "rule"),
    [
        ("cut.json", lambda: _locomo_text()[:300].encode(), "cut.json: is not JSON ("),
        ("cut.json.gz", lambda: gzip.compress(_locomo_text().encode())[:200], "cannot be infl"),
        ("junk.json", lambda: b"garbage", "junk.json: line 1 is not JSON"),
        (
            "cat.json",
            lambda: _locomo_text().replace('"category": 4', '"category": "four"').encode(),
            "cat.json: sample 'conv-x': qa[0].category: must be an integer (1–5)",
        ),
        (
            "qa.json",
            lambda: _locomo_text().replace('"qa": [', '"qa": {"x": [').replace("}]}]", "}]}}]"),
            "qa.json: sample 'conv-x': qa: must be a list of questions",
        ),
    ],
)
def test_a_damaged_locomo_file_is_one_line_naming_data(
    name: str, content: Callable[[], bytes | str], rule: str, tmp_path: Path
) -> None:
    # A truncated or hand-broken file was a JSONDecodeError / KeyError traceback (exit 1); a
    # truncated gzip "Aborted!" as if Ctrl-C had been pressed.
    data = tmp_path / name
    raw = content()
    data.write_bytes(raw if isinstance(raw, bytes) else raw.encode())
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(data)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --data: ") and rule in result.stderr, result.stderr
    assert "Traceback" not in result.output and "Aborted" not in result.output


def _cut_gzip(root: Path) -> None:
    packed = gzip.compress((root / "corpus.jsonl").read_bytes())
    (root / "corpus.jsonl").unlink()
    (root / "corpus.jsonl.gz").write_bytes(packed[:40])


@pytest.mark.parametrize(
    ("damage", "rule"),
    [
        (_cut_gzip, "corpus.jsonl.gz cannot be read (it ends before its data does)"),
        (lambda r: (r / "corpus.jsonl").write_text('{"_id": "d1", "ti'), "line 1 is not JSON"),
        (lambda r: (r / "corpus.jsonl").write_text('{"title": "x"}\n'), "must be an object with"),
        (lambda r: (r / "queries.jsonl").write_text("[1]\n"), "queries.jsonl line 1: must be"),
        (lambda r: (r / "qrels" / "test.tsv").write_bytes(b"q1\td1\t\xff1\n"), "not UTF-8 text"),
        (lambda r: (r / "qrels" / "test.tsv").write_text("q1\td1\t0\n"), "no query of its"),
    ],
)
def test_a_damaged_beir_dataset_is_one_line_naming_data(
    damage: Callable[[Path], object], rule: str, beir_dir: Path
) -> None:
    # Each was a traceback (EOFError as "Aborted!", JSONDecodeError, KeyError, TypeError,
    # UnicodeDecodeError) or, with no judged query, "--qrels", an option there is not.
    damage(beir_dir)
    result = CliRunner().invoke(main, ["bench", "bm25", "--data", str(beir_dir)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: --data: {beir_dir}"), result.stderr
    assert rule in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("command", ["scale", "cold", "beir", "locomo"])
@pytest.mark.usefixtures("no_benchmark")
def test_a_bad_model_is_refused_naming_model_before_the_benchmark_runs(command: str) -> None:
    # It was named `--embedding.model` (beir, locomo), an option there is not, or
    # `embedding.model` (scale, cold), and `bench locomo` read its data first.
    result = CliRunner().invoke(main, ["bench", command, "--model", "bogus"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith('error: model: must be "minilm" or PROVIDER:MODEL'), (
        result.stderr
    )


@pytest.mark.parametrize("first", ["--output", "--update"])
@pytest.mark.usefixtures("no_benchmark")
def test_output_naming_the_readme_to_update_is_refused(first: str, tmp_path: Path) -> None:
    # The JSON replaced the README, then its table could not be found: the README lost.
    readme = tmp_path / "README.md"
    readme.write_text("<!-- scale:start -->\n<!-- scale:end -->\n")
    second = "--update" if first == "--output" else "--output"
    args = ["bench", "scale", first, str(readme), second, str(tmp_path / "." / "README.md")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    said = f"{second[2:]}: --output and --update name one file ({readme}); write the JSON"
    assert result.stderr.startswith(f"error: {said}"), result.stderr
    assert readme.read_text() == "<!-- scale:start -->\n<!-- scale:end -->\n"


def test_a_locomo_data_path_that_does_not_exist_is_said_so(tmp_path: Path) -> None:
    # It said "holds no LoCoMo file", as of an empty folder, for a mistyped path.
    missing = tmp_path / "locomo-dve"
    result = CliRunner().invoke(main, ["bench", "locomo", "--data", str(missing)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: --data: {missing}: no such file or directory")


def test_bench_locomo_keeps_its_embedding_cache_where_its_help_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its help said "Default: the user cache directory" (~/.cache), while the vectors went to
    # <data dir>/cache/embeddings, as `bench beir`'s help says of its own.
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    for command in ("beir", "locomo"):
        shown = CliRunner().invoke(main, ["bench", command, "--help"]).output
        assert "Embedding cache. Default: <data dir>/cache/embeddings." in " ".join(shown.split())
    data = tmp_path / "locomo.json"
    data.write_text(_locomo_text(), encoding="utf-8")
    result = CliRunner().invoke(
        main, ["bench", "locomo", "--data", str(data), "--model", "hash:32", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "data" / "cache" / "embeddings").glob("*.sqlite"))
