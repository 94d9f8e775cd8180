"""The README's own command lines, run as a new user would type them.

Every `octobrain …` line of the shell blocks in "Quickstart", "Using it" and "Knowledge" runs
against a fresh store (hash embedder, in-process), in the order the README gives them, and so
do the refusals the prose quotes with their exact error line: a flag renamed, an output
reshaped or an example that stopped working fails here instead of on a reader. So does a test
file, repository path or `make` target the README names that is not there.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from tests.knowledge.conftest import write_pdf

README = Path(__file__).resolve().parents[1] / "README.md"
FIRST, LAST = "## Quickstart", "## Use it from an MCP client"

# Lines that need what a test machine does not have: a network, a dataset, an unspecified id.
NOT_RUN = (
    "bench ",  # datasets under ../shared/data; test_bench_smoke.py covers the commands
    "https://",  # the network
    " ...",  # `memory get|recent|stats|relate|graph ...`: arguments left to the reader
)
# Lines a healthy new store answers with a refusal, and the refusal it gives.
REFUSED = {
    "doctor --recreate knowledge": "knowledge opens and reads whole",
}


def readme_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index(FIRST) : text.index(LAST)]


def shell_commands(section: str) -> list[str]:
    """The `octobrain …` commands of the section's ```sh blocks, comments cut, `a|b` spelled
    out as one command per alternative, in README order."""
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            for part in line.split(" && "):
                words = shlex.split(part, comments=True)
                if words[:1] != ["octobrain"] or any(s in part for s in NOT_RUN):
                    continue
                commands.extend(_alternatives(words[1:]))
    return commands


def _alternatives(words: list[str]) -> list[str]:
    """`config show|path|init` is three commands; a `|` inside a quoted pattern is not."""
    for i, word in enumerate(words):
        if "|" in word and i < 2 and re.fullmatch(r"[a-z-]+(\|[a-z-]+)+", word):
            return [shlex.join([*words[:i], alt, *words[i + 1 :]]) for alt in word.split("|")]
    return [shlex.join(words)]


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with the files the README's examples name, and a fresh store."""
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    project = tmp_path / "work" / "api"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "architecture.md").write_text(
        "# Architecture\n\n## Retries\n\nRetries are bounded: three attempts with jitter.\n"
        "TODO: document the budget.\n",
        encoding="utf-8",
    )
    # Long enough for `read paper.pdf --from-line 1200`: 1,300 lines on 26 pages.
    pages = [[f"Line {50 * p + i + 1} of the paper." for i in range(50)] for p in range(26)]
    write_pdf(project / "paper.pdf", pages)
    turns = [
        {"speaker": "ann", "text": "Ship the migration on Friday.", "time": "2026-05-01T10:00"},
        {"speaker": "bob", "text": "Friday works, after the freeze.", "time": "2026-05-01T10:01"},
    ]
    (project / "session.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8"
    )
    monkeypatch.chdir(project)
    return project


def octobrain(command: str) -> Result:
    return CliRunner().invoke(main, shlex.split(command), prog_name="octobrain")


def test_the_readme_has_the_commands_this_test_runs() -> None:
    commands = shell_commands(readme_section())
    assert len(commands) >= 30, commands
    for needed in ("memory memorize", "memory remember", "knowledge index", "doctor"):
        assert any(c.startswith(needed) for c in commands), needed


def test_every_command_of_quickstart_and_using_it_runs(user: Path) -> None:
    ids: list[str] = []
    for command in shell_commands(readme_section()):
        # The README's placeholders and its example ids, filled in as a reader would.
        if ids:
            command = command.replace("'<id>'", ids[0]).replace("'<old-id>'", ids[-1])
            command = command.replace("'<other-id>'", ids[min(1, len(ids) - 1)])
            command = command.replace("3c502a11", ids[-1][:8])
        if "'<version>'" in command:
            versions = json.loads(octobrain("memory history --format json").output)
            command = command.replace("'<version>'", str(versions[-1]["version"]))
        command = command.replace("'<source>'", "docs/architecture.md")
        result = octobrain(command)
        refusal = next((why for cmd, why in REFUSED.items() if command == cmd), None)
        if refusal is not None:
            assert result.exit_code == 2 and refusal in result.output, (command, result.output)
            continue
        assert result.exit_code == 0, (command, result.output, result.exception)
        if command.startswith("memory memorize"):
            assert result.output.startswith("Memory stored: "), result.output
            ids.append(result.output.split()[2])
    assert len(ids) >= 3


# The command that gives each error line the prose quotes (None: needs a store this test
# cannot make, two memories whose ids share their first 8 hex digits).
QUOTED_ERRORS = {
    "error: --global: contradicts --scope acme/shop, given before `remember`; give the scope "
    "once": "memory --scope acme/shop remember x --global",
    "error: --scope: `memory history` works on the whole store, every scope, and takes no "
    "--scope": "memory history --scope acme/shop",
    "error: title: must be 5–200 bytes of UTF-8 after trimming, got 3": (
        "memory memorize -t abc -c 'Ten bytes or more of content.'"
    ),
    "error: title: is required (-t / --title); see 'octobrain memory memorize --help'": (
        "memory memorize -c 'Ten bytes or more of content.'"
    ),
    "error: memory_id: abcdef12 is ambiguous, 2 memories start with it: …": None,
}


def quoted_errors(section: str) -> list[str]:
    """The error lines the section quotes, ``in double`` or `in single` backticks."""
    double = re.findall(r"``(error:.*?)``", section, flags=re.S)
    single = re.findall(r"`(error:[^`]*)`", re.sub(r"``.*?``", "", section, flags=re.S))
    return [" ".join(line.split()) for line in double + single]


def test_every_error_line_the_prose_quotes_is_the_one_given(user: Path) -> None:
    quoted = quoted_errors(readme_section())
    assert set(quoted) == set(QUOTED_ERRORS), "a quoted error line changed: update QUOTED_ERRORS"
    for line, command in QUOTED_ERRORS.items():
        if command is None:
            continue
        result = octobrain(command)
        assert result.exit_code == 2, (command, result.output)
        assert line in " ".join(result.output.split()), (command, result.output)


# Options whose default is a setting: `--help` names the setting and its default value, as the
# README says every option's help does (these named neither).
SETTING_DEFAULTS = [
    ("memory memorize", "--importance", "memory.default_importance"),  # said "default 0.5"
    ("memory remember", "--min-relevance", "search.min_relevance"),
    ("knowledge search", "--min-relevance", "knowledge.min_relevance"),
    ("knowledge search", "--limit", "knowledge.max_results"),
    ("knowledge match", "--max-matches", "knowledge.max_matches"),
    ("hook session-start", "--max-tokens", "brief.max_tokens"),
    ("brief", "--max-tokens", "brief.max_tokens"),
    # (these said "default 0.85", "3", "7": a changed setting's value was not the one shown)
    ("memory sleep-consolidate", "--threshold", "consolidation.threshold"),
    ("memory sleep-consolidate", "--min-size", "consolidation.min_cluster_size"),
    ("memory sleep-consolidate", "--max-age-days", "consolidation.max_age_days"),
]


@pytest.mark.parametrize(("command", "option", "setting"), SETTING_DEFAULTS)
def test_help_names_the_setting_an_option_defaults_to(
    command: str, option: str, setting: str
) -> None:
    from octobrain.config import Config

    section, key = setting.split(".")
    default = getattr(getattr(Config(), section), key)
    help_text = " ".join(octobrain(f"{command} --help").output.split())
    said = help_text[help_text.index(option) :].split(" -", 1)[0]
    assert f"(default: {setting}, {default})" in said, said


# The files, make targets and code names the README points a reader to, checked to exist: a
# file renamed or a constant moved fails here instead of sending a reader to nothing.
REPO = README.parent
PACKAGE = REPO / "python" / "octobrain"


def readme_spans() -> list[str]:
    """Every `inline code` span of the README, and every line of its ```sh blocks."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", text) + [line for b in blocks for line in b.splitlines()]


def test_every_test_file_the_readme_names_exists() -> None:
    """`(test_ingest.py)`, `(reliability/test_doctor_races.py)`: each names a file of tests/."""
    text = README.read_text(encoding="utf-8")
    files = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")}
    named = set(re.findall(r"(?<![\w/.-])((?:[\w-]+/)*test_\w+\.py)", text))
    missing = sorted(n for n in named if not any(f == n or f.endswith("/" + n) for f in files))
    assert not missing, missing


def test_every_repo_path_the_readme_names_exists() -> None:
    """`benches/edge_lookup.py`, `.ci/run`, `memory/snapshot.py` and `octobrain/memory/access.py`
    (in python/); a path with a glob or a placeholder (`benches/results/locomo*.json`) is not."""
    subpackages = "|".join(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    repo_path = re.compile(
        r"(?<![\w/.])(?:python|tests|benches|rust|\.ci|octobrain)/[\w./*<>…-]*[\w/*>]"
    )
    module_path = re.compile(rf"(?<![\w/.])(?:{subpackages})/(?!test_)\w+\.py")
    missing = [
        path
        for span in readme_spans()
        for path in repo_path.findall(span) + module_path.findall(span)
        if not any(c in path for c in "*<…")
        and not (REPO / path).exists()
        and not (PACKAGE / path).exists()
        and not (PACKAGE.parent / path).exists()
    ]
    assert not missing, missing


def test_every_make_target_the_readme_names_exists() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, flags=re.M))
    named = {t for s in readme_spans() for t in re.findall(r"^make ([\w -]+?)\s*(?:#|$)", s)}
    missing = sorted(t for group in named for t in group.split() if t not in targets)
    assert named and not missing, missing


# `vectors.npy`, `memories.lance`: file names, not a module's attribute.
FILE_SUFFIXES = {"py", "rs", "json", "jsonl", "toml", "md", "txt", "npy", "lance", "arrow"}


def _defines(module: Path, name: str) -> bool:
    source = module.read_text(encoding="utf-8") if module.is_file() else ""
    return re.search(rf"^\s*(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]", source, re.M) is not None


def test_every_code_name_the_readme_places_is_there() -> None:
    """`cli.launch.exit_now`, `models.link_description`, `knowledge/docx_text.title_and_text`
    and "`ANN_POSTFILTER_SHARE` in `memory/ann.py`" each name a module that defines the name
    (a setting, `search.min_relevance`, is no module)."""
    from octobrain.config import Config

    settings = {f.name for f in dataclasses.fields(Config)}
    modules: dict[str, list[Path]] = {}
    for path in PACKAGE.rglob("*.py"):
        modules.setdefault(path.stem, []).append(path)
    wrong = []
    for span in readme_spans():
        dotted = re.fullmatch(r"((?:\w+[./])*\w+)\.([A-Za-z_]\w*)", span)
        if dotted and dotted[2] not in FILE_SUFFIXES:
            where, name = dotted[1].replace(".", "/"), dotted[2]
            first = where.split("/")[0]
            if "/" in where and (PACKAGE / where).with_suffix(".py").is_file():
                places = [(PACKAGE / where).with_suffix(".py")]
            elif "/" not in where and first not in settings and len(modules.get(first, [])) == 1:
                places = modules[first]
            else:
                continue
            if not any(_defines(p, name) for p in places):
                wrong.append(span)
    text = README.read_text(encoding="utf-8")
    for name, path in re.findall(r"`(\w+)` in `([\w/]+\.py)`", text):
        module = PACKAGE / path if (PACKAGE / path).exists() else REPO / path
        if not _defines(module, name):
            wrong.append(f"{name} in {path}")
    assert not wrong, wrong
