"""`octobrain config show | path | init` and the CLI's one-line error reporting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.config import Config, load_config
from tests.server_support import outside_env


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in list(os.environ):
        if name.startswith("OCTOBRAIN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    return CliRunner()


def test_path_prints_the_default_location(runner: CliRunner, tmp_path: Path):
    result = runner.invoke(main, ["config", "path"])
    assert result.exit_code == 0
    assert result.stdout.strip() == str(tmp_path / "data" / "config.toml")


def test_path_follows_env(runner: CliRunner, tmp_path: Path):
    target = tmp_path / "cfg" / "my.toml"
    result = runner.invoke(main, ["config", "path"], env={"OCTOBRAIN_CONFIG_PATH": str(target)})
    assert result.stdout.strip() == str(target)


def test_init_writes_template_then_refuses_to_overwrite(runner: CliRunner, tmp_path: Path):
    path = tmp_path / "data" / "config.toml"
    first = runner.invoke(main, ["config", "init"])
    assert first.exit_code == 0, first.stderr
    assert path.exists() and load_config(path) == Config()

    path.write_text("[search]\nmin_relevance = 0.9\n", encoding="utf-8")
    second = runner.invoke(main, ["config", "init"])
    assert second.exit_code == 2
    assert second.stderr.startswith("error: config: ")
    assert "--force" in second.stderr
    assert "Traceback" not in second.stderr + second.stdout
    assert load_config(path).search.min_relevance == 0.9, "must not overwrite"

    forced = runner.invoke(main, ["config", "init", "--force"])
    assert forced.exit_code == 0
    assert load_config(path) == Config()


def test_show_text_is_toml_of_the_effective_config(runner: CliRunner, tmp_path: Path):
    path = tmp_path / "data" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("[search]\nmin_relevance = 0.55\n", encoding="utf-8")
    result = runner.invoke(main, ["config", "show"], env={"OCTOBRAIN_SEARCH_RRF_K": "10"})
    assert result.exit_code == 0, result.stderr
    assert f"# file: {path}" in result.stdout
    assert "OCTOBRAIN_SEARCH_RRF_K" in result.stdout
    body = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("#"))
    (tmp_path / "shown.toml").write_text(body, encoding="utf-8")
    shown = load_config(tmp_path / "shown.toml")
    assert shown.search.min_relevance == 0.55
    assert shown.search.rrf_k == 10


def test_show_hides_the_token_and_names_variables_that_are_no_setting(runner: CliRunner):
    token = "s3cr3t-bearer-token-0123456789"
    env = {
        "OCTOBRAIN_MCP_TOKEN": token,
        "OCTOBRAIN_BRIEF_MAXTOKENS": "500",
        "OCTOBRAIN_STORAGE_OPTIONS": "region=eu-west-1,aws_secret_access_key=wJalrXUtnFEMIK7",
    }
    for fmt in ("text", "json"):
        result = runner.invoke(main, ["config", "show", "--format", fmt], env=env)
        assert result.exit_code == 0, result.stderr
        # Before: the token and the storage secret printed in clear; the misspelt variable
        # listed as if applied.
        assert token not in result.stdout and "<set: 30 characters>" in result.stdout
        assert "wJalrXUtnFEMIK7" not in result.stdout and "region=eu-west-1" in result.stdout
        assert "OCTOBRAIN_BRIEF_MAXTOKENS" in result.stdout
    text = runner.invoke(main, ["config", "show"], env=env).stdout
    assert "# ignored, not a setting (misspelt?): OCTOBRAIN_BRIEF_MAXTOKENS" in text
    assert "# environment: OCTOBRAIN_DATA_DIR, OCTOBRAIN_MCP_TOKEN" in text
    shown = json.loads(runner.invoke(main, ["config", "show", "--format", "json"], env=env).stdout)
    assert shown["ignored_environment"] == ["OCTOBRAIN_BRIEF_MAXTOKENS"]


def test_show_json(runner: CliRunner, tmp_path: Path):
    result = runner.invoke(main, ["config", "show", "--format", "json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["exists"] is False
    assert data["path"] == str(tmp_path / "data" / "config.toml")
    assert data["config"] == Config().to_dict()
    assert data["config"]["search"]["hyde"]["alpha"] == 0.5


def test_show_reports_invalid_value_in_one_line(runner: CliRunner, tmp_path: Path):
    path = tmp_path / "data" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[search]\nfusion = "max"\n', encoding="utf-8")
    result = runner.invoke(main, ["config", "show"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {path}: search.fusion: must be one of rrf, minmax, zscore"]


def test_show_reports_bad_env_var(runner: CliRunner):
    result = runner.invoke(main, ["config", "show"], env={"OCTOBRAIN_SEARCH_HYDE_TOP_K": "x"})
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: OCTOBRAIN_SEARCH_HYDE_TOP_K: must be an integer"


def test_show_rejects_unknown_format(runner: CliRunner):
    result = runner.invoke(main, ["config", "show", "--format", "yaml"])
    assert result.exit_code == 2


def test_domain_failure_that_is_not_bad_input_exits_1(runner: CliRunner):
    """The group maps any OctobrainError; a command added later inherits that."""
    from octobrain.cli.main import config_group
    from octobrain.errors import EmbeddingError

    @config_group.command("explode-for-test")
    def explode() -> None:
        raise EmbeddingError("model unavailable: do X")

    try:
        result = runner.invoke(main, ["config", "explode-for-test"])
    finally:
        config_group.commands.pop("explode-for-test")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: model unavailable: do X"


def test_real_process_help_is_cheap_and_errors_have_no_traceback(tmp_path: Path):
    env = outside_env()
    env["OCTOBRAIN_DATA_DIR"] = str(tmp_path)
    probe = (
        "import sys; from octobrain.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "mods = ('fastembed', 'onnxruntime', 'lancedb', 'httpx')\n"
        "heavy = [m for m in mods if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr

    (tmp_path / "config.toml").write_text("[search\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "octobrain", "config", "show"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {tmp_path / 'config.toml'}: invalid TOML")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("text", ["", "# comments only\n\n"])
def test_a_config_file_that_holds_no_setting_is_named_by_show_and_doctor(
    runner: CliRunner, tmp_path: Path, text: str
):
    # An emptied config.toml (a crash, a `> config.toml`) fell back to every default without
    # a word: a `storage.uri` it held pointed every command at the default store, empty, and
    # `config show` and `doctor` said nothing of the file.
    path = tmp_path / "data" / "config.toml"
    path.parent.mkdir()
    path.write_text(text)
    shown = runner.invoke(main, ["config", "show"])
    assert shown.exit_code == 0, shown.output
    said = f"{path} (holds no setting: defaults apply)"
    assert f"# file: {said}" in shown.stdout, shown.stdout
    doctor = runner.invoke(main, ["doctor"])
    assert doctor.exit_code == 0, doctor.output
    assert f"config: {said}" in doctor.stdout, doctor.stdout
    as_json = json.loads(runner.invoke(main, ["doctor", "--format", "json"]).stdout)
    assert as_json["config"] == {"path": str(path), "state": "holds no setting"}, as_json
