"""Smoke runs of `octobrain bench beir` and `octobrain bench scale` (hash embedder, small data),
so the benchmark commands cannot rot, and of a script under benches/. The real numbers live in
the README."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.store import seen

BENCHES = Path(__file__).resolve().parents[1] / "benches"

README = (
    "intro\n<!-- beir:start -->\nSTALE TABLE\n<!-- beir:end -->\n"
    "<!-- scale:start -->\n<!-- scale:end -->\n"
)


def _synthetic_beir(root: Path, docs: int = 300, queries: int = 40) -> Path:
    """Topic documents; each query uses some words of its one relevant document."""
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(2000)]
    (root / "qrels").mkdir(parents=True)
    texts = [rng.sample(vocab, 40) for _ in range(docs)]
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for i, words in enumerate(texts):
            doc = {"_id": f"d{i}", "title": " ".join(words[:4]), "text": " ".join(words[4:])}
            f.write(json.dumps(doc) + "\n")
    lines = ["query-id\tcorpus-id\tscore"]
    with (root / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in range(queries):
            target = rng.randrange(docs)
            words = rng.sample(texts[target], 3) + rng.sample(vocab, 1)
            f.write(json.dumps({"_id": f"q{q}", "text": " ".join(words)}) + "\n")
            lines.append(f"q{q}\td{target}\t1")
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def beir_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _synthetic_beir(tmp_path_factory.mktemp("beir"))


@pytest.mark.parametrize("path", ["knowledge", "memory"])
def test_bench_beir_smoke(beir_dir: Path, tmp_path: Path, path: str) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    out = tmp_path / "beir.json"
    args = ["bench", "beir", "--data", str(beir_dir), "--path", path, "--model", "hash:256"]
    args += ["--modes", "bm25,dense,rrf,minmax,default", "--max-queries", "30"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--output", str(out), "--update", str(readme)]
    result = CliRunner().invoke(main, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    assert (report["docs"], report["queries"], report["rows"]) == (300, 30, 300)
    modes = {m["mode"]: m for m in report["modes"]}
    assert list(modes) == ["bm25", "dense", "rrf", "minmax", "default"]
    # Three of four query words come from the relevant document: exact words find it.
    assert modes["bm25"]["recall_at_10"] >= 0.9
    assert modes["default"]["ndcg_at_10"] >= 0.7
    assert all(m["search_p95_ms"] >= m["search_p50_ms"] > 0 for m in modes.values())
    assert report["embedded"] == 300 and report["cached"] == 0 and report["peak_rss_mb"] > 0
    text = readme.read_text()
    assert "STALE TABLE" not in text and "| **default** |" in text
    assert "<!-- scale:start -->" in text
    # A second run finds every document embedding in the cache.
    again = CliRunner().invoke(main, [*args[:-4], "--modes", "bm25", "--format", "json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["cached"] == 300


def test_bench_beir_rejects_unknown_mode(beir_dir: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "beir", "--data", str(beir_dir), "--modes", "x"])
    assert result.exit_code == 2 and "error: --modes: unknown mode(s) x" in result.output
    assert "default" in result.output


@pytest.mark.parametrize("flag", ["--whole-passages", "--bytes-only-chunks"])
def test_bench_beir_chunking_flags_are_refused_on_the_memory_path(
    beir_dir: Path, flag: str
) -> None:
    args = ["bench", "beir", "--data", str(beir_dir), "--path", "memory", flag]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and flag in result.output and "--path knowledge" in result.output


def test_bench_scale_smoke(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    args = ["bench", "scale", "--sizes", "150,300", "--queries", "5", "--model", "hash:384"]
    result = CliRunner().invoke(main, [*args, "--format", "json", "--update", str(readme)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    sizes = report["sizes"]
    assert [s["memories"] for s in sizes] == [150, 300]
    for s in sizes:
        assert s["remember_p95_ms"] >= s["remember_p50_ms"] > 0
        assert s["memorize_per_s"] > 0 and s["import_per_s"] > 0 and s["store_mb"] > 0
        assert s["cold_start_ms"] > 0 and s["sleep_seconds"] >= 0 and s["serving_rss_mb"] > 0
    assert sizes[1]["store_mb"] > sizes[0]["store_mb"]
    assert "| 300 |" in readme.read_text()
    bad = CliRunner().invoke(main, ["bench", "scale", "--sizes", "1,x"])
    assert bad.exit_code == 2 and "--sizes" in bad.output


def test_bench_scale_writes_a_bulk_store_whose_rows_match_their_checksums(tmp_path: Path) -> None:
    # The bulk writer (every size from --bulk-from, 200,000 by default: the README's 100k and
    # 1M rows) gave a pyarrow KeyError traceback once rows carried a checksum column.
    import lancedb

    from octobrain.store.schema import verified

    args = ["bench", "scale", "--sizes", "40", "--bulk-from", "40", "--queries", "3"]
    args += ["--model", "hash:384", "--store-dir", str(tmp_path / "kept"), "--format", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sizes"][0]["bulk_import_per_s"] > 0
    rows = lancedb.connect(tmp_path / "kept" / "40" / "db").open_table("memories").to_arrow()
    assert rows.num_rows == 40
    assert all(verified(row) for row in rows.to_pylist())


def test_a_bench_script_leaves_no_mark_of_its_throwaway_stores(tmp_path: Path) -> None:
    # Every store opened leaves a mark in the data dir, so that one gone whole is refused
    # (`store.seen`): the scripts under benches/ made their stores in a temporary directory
    # and left a mark of each in the user's data dir, two more at every run of this one.
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, str(BENCHES / "backup_roundtrip.py"), "--memories", "40"],
        env={**os.environ, "OCTOBRAIN_DATA_DIR": str(data)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and "| 40 / 8 / 0 |" in done.stdout, done.stderr
    assert list((data / seen.FOLDER).glob("*.json")) == []


@pytest.mark.parametrize(
    ("name", "marker", "options"),
    [
        ("backup_roundtrip.py", "backup", ["--memories", "40"]),
        # (These two measured, then gave a traceback: `make bench-remember` / `bench-team`.)
        (
            "remember_latency.py",
            "remember",
            ["--sizes", "2", "--queries", "2", "--model", "hash:4"],
        ),
        ("shared_store.py", "team", ["--size", "2", "--queries", "2", "--model", "hash:4"]),
    ],
)
def test_a_bench_script_refuses_a_readme_without_its_markers_before_it_measures(
    tmp_path: Path, beir_dir: Path, name: str, marker: str, options: list[str]
) -> None:
    # The scripts read `--update` once their run was done: a traceback then (soak.py wrote its
    # table at the README's end, or over all that followed a lone start marker).
    readme = tmp_path / "README.md"
    readme.write_text(f"<!-- {marker}:start -->\nno end marker\n", encoding="utf-8")
    script = [sys.executable, str(BENCHES / name), *options]
    if name != "backup_roundtrip.py":
        script += ["--data", str(beir_dir)]
    done = subprocess.run(
        [*script, "--update", str(readme)],
        env={**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert "error: update: " in done.stderr and f"has no <!-- {marker}:start -->" in done.stderr
    assert readme.read_text(encoding="utf-8") == f"<!-- {marker}:start -->\nno end marker\n"


def test_every_bench_script_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    # `python benches/multi_query.py`, which the README quotes, stopped at an ImportError of a
    # name the package had renamed (`memory.search._Scored`): mypy does not read benches/.
    monkeypatch.syspath_prepend(str(BENCHES))
    broken = []
    for script in sorted(BENCHES.glob("*.py")):
        if script.stem != "conftest" and not script.stem.startswith("bench_"):
            try:
                importlib.import_module(script.stem)
            except ImportError as exc:
                broken.append(f"{script.name}: {exc}")
    assert broken == []


def test_the_soak_table_names_the_options_it_ran_with(monkeypatch: pytest.MonkeyPatch) -> None:
    # It said `python benches/soak.py` whatever the options: the README's table (1 round, 5
    # kills a scenario, 120 HTTP calls) is not what that command runs (3, 10 and 240).
    monkeypatch.syspath_prepend(str(BENCHES))
    import soak

    ap = soak.parser()
    args = ap.parse_args(["--rounds", "1", "--kills", "5", "--budget", "60", "--json", "s.json"])
    line = soak.command_line(ap, args)
    assert line == "python benches/soak.py --rounds 1 --kills 5 --budget 60"
    assert soak.command_line(ap, ap.parse_args(["--update", "README.md"])) == (
        "python benches/soak.py"
    )
    report = json.loads((BENCHES / "results" / "soak.json").read_text(encoding="utf-8"))
    assert f"Soak run: `{line}` (" in soak.render({**report, "command": line})


def test_catchup_records_the_model_it_ran_with_and_refuses_a_clone_without_a_place(
    tmp_path: Path,
) -> None:
    # Its JSON said `hash:256` (the default) for a `--model hash:384` run (the README's 1M
    # clone), and `--clone-from` without `--store-dir` ended in an AssertionError traceback.
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data")}
    script = [sys.executable, str(BENCHES / "catchup.py")]
    out = tmp_path / "catchup.json"
    options = ["--sizes", "20", "--rounds", "1", "--model", "hash:16", "--output", str(out)]
    done = subprocess.run(
        [*script, *options], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["model"] == "hash:16"
    done = subprocess.run(
        [*script, "--clone-from", str(tmp_path / "db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "error: --clone-from needs --store-dir" in done.stderr


def test_the_soaks_cli_writers_leave_no_resident_service_behind() -> None:
    # Its CLI writers started a resident service (tests/conftest.py turns it off, the soak did
    # not), which outlived the round, its data directory deleted, for service.idle_seconds.
    mark = f"soak-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k != "OCTOBRAIN_SERVICE_ENABLED"}
    code = (  # (benches/ on sys.path as when the script runs: no PYTHONPATH for its writers)
        f"import sys\nsys.path.insert(0, {str(BENCHES)!r})\nimport soak\n"
        "from tests.reliability.load import Plan\n"
        "plan = Plan(cli_workers=1, cli_ops=1, stdio_workers=0, http_workers=0, mcp_ops=0)\n"
        "assert soak.mixed(1, plan)['problems'] == 0\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "SOAK_TEST_MARK": mark},
        cwd=BENCHES.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _left_behind(mark) == []


def _left_behind(mark: str) -> list[str]:
    """The processes still running with `SOAK_TEST_MARK=mark` in their environment (each is
    sent SIGTERM: a failed run's are not left to linger)."""
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if f"SOAK_TEST_MARK={mark}".encode() in environ.read_bytes().split(b"\0"):
                left.append(environ.parent.name)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGTERM)
    return left


def test_the_noise_tables_command_names_its_seed_and_question_count(tmp_path: Path) -> None:
    # It left out --seed and --min-questions whatever they were: a table of 1,332 questions
    # named a command that asks 3,000 (README: "two runs of --sizes 1000 --min-questions 1000").
    script = [sys.executable, str(BENCHES / "recall_under_noise.py"), "--sizes", "100"]
    options = ["--min-questions", "10", "--seed", "3", "--json", str(tmp_path / "noise.json")]
    done = subprocess.run(
        [*script, *options],
        env={**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "`python benches/recall_under_noise.py --sizes 100 --model hash:256 --seed 3 "
        "--min-questions 10 --update README.md`"
    ) in done.stdout


def test_forget_many_keeps_to_its_own_store_whatever_the_users_settings(tmp_path: Path) -> None:
    # Its `memory import` and `memory forget` processes kept the user's OCTOBRAIN_* settings:
    # a storage URI (or a config file naming one) had them import its synthetic memories
    # into the user's own store and forget them there (then a traceback). Its timed processes
    # are new ones, whatever the user's service setting: none is left behind.
    own, mark = tmp_path / "users-store", f"forget-{uuid.uuid4().hex}"
    env = {**os.environ, "OCTOBRAIN_STORAGE_URI": str(own), "OCTOBRAIN_SERVICE_ENABLED": "1"}
    done = subprocess.run(
        [sys.executable, str(BENCHES / "forget_many.py"), "--size", "20", "--ids", "2"],
        env={**env, "SOAK_TEST_MARK": mark},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "forget 2 8-digit prefixes of 20: median" in done.stdout
    assert not own.exists()
    assert _left_behind(mark) == []


def test_ingest_alongside_reports_an_ingest_that_answered_before_any_remember(
    tmp_path: Path,
) -> None:
    # An ingest that answered within its 0.2 s head start (a few turns, the hash embedder)
    # left no `remember` during it: a traceback (no median for empty data) after the run.
    output = tmp_path / "alongside.json"
    options = ["--model", "hash:64", "--turns", "2", "--bytes", "50", "--json", str(output)]
    done = subprocess.run(
        [sys.executable, str(BENCHES / "ingest_alongside.py"), *options],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(output.read_text(encoding="utf-8"))
    assert result["turns"] == 2 and result["remember_before_p50_ms"] > 0
    assert (result["remember_during"] == 0) == (result["remember_during_p50_ms"] is None)


@pytest.mark.parametrize("seed", ["1", "10"])
def test_the_backup_round_trip_stores_only_links_an_import_takes(seed: str) -> None:
    # Its random links included what `memory relate` refuses: a note closing two goals (seed
    # 1), left out by the import, so "1 row differing" (exit 1); a memory linked to itself
    # (seed 10), for which the import refused the whole file (a traceback).
    done = subprocess.run(
        [sys.executable, str(BENCHES / "backup_roundtrip.py"), "--memories", "300", "--seed", seed],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[2].endswith(" | 0 |"), done.stdout
