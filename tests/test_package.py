"""The installed package: version source, cheap imports, console script."""

from __future__ import annotations

import importlib.metadata
import json
import pkgutil
import shutil
import subprocess
import sys
import sysconfig

import pytest

import octobrain
from octobrain import _core

# Never loaded by merely importing a module: these cost seconds and hundreds of MB.
HEAVY = ("lancedb", "fastembed", "onnxruntime")
# `octobrain --help` must not even load the data-layer libraries.
HEAVY_FOR_HELP = (*HEAVY, "pyarrow", "mcp", "httpx")


def test_version_has_one_source() -> None:
    # Cargo's workspace version flows into the wheel metadata and the compiled core alike.
    dist = importlib.metadata.version("octobrain")
    assert octobrain.__version__ == dist == _core.__version__


def test_importing_every_module_stays_light() -> None:
    modules = [
        info.name
        for info in pkgutil.walk_packages(octobrain.__path__, "octobrain.")
        if info.name != "octobrain.__main__"  # importing it runs the CLI
    ]
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [], f"heavy modules imported at import time: {out.stdout}"


@pytest.mark.parametrize(
    "args",
    # (a group's or command's help too: it ended in the error handling, which loaded the store)
    [["--help"], ["memory", "--help"], ["hook", "session-end", "--help"]],
)
def test_help_does_not_load_heavy_dependencies(args: list[str]) -> None:
    code = (
        "import json, sys\n"
        "from octobrain.cli.main import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
        f"sys.stderr.write(json.dumps(sorted(m for m in {HEAVY_FOR_HELP!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: " in out.stdout
    assert json.loads(out.stderr) == []


def test_console_script_reports_version() -> None:
    # The script pip installed beside this interpreter, as a user would run it.
    exe = shutil.which("octobrain", path=sysconfig.get_path("scripts"))
    assert exe is not None, "pip did not install the `octobrain` console script"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"octobrain, version {octobrain.__version__}"


def test_public_api_is_named_at_the_top_and_resolves() -> None:
    """What a library user imports: every name in `octobrain.__all__` resolves, from its module."""
    for name in octobrain.__all__:
        assert getattr(octobrain, name) is not None, name
    assert octobrain.Brain.__module__ == "octobrain.memory.brain"
    assert issubclass(octobrain.InvalidInput, ValueError)
    assert "Brain" in dir(octobrain)


def test_public_api_example_runs(tmp_path, monkeypatch) -> None:
    """The package docstring's example, bundled model: a memory written through `Brain` is found."""
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    code = octobrain.__doc__.split("::", 1)[1].split("\n\n`Brain`", 1)[0]
    show = "\nimport sys\nsys.stdout.write(best.memory.title)\n"  # the example's last line, shown
    out = subprocess.run(
        [sys.executable, "-c", __import__("textwrap").dedent(code) + show],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout == "Rate limits", out.stdout + out.stderr


def test_public_api_list_matches_its_table() -> None:
    assert sorted(octobrain.__all__) == sorted([*octobrain._PUBLIC, "__version__"])


def test_readme_map_names_every_part_of_the_package() -> None:
    """The folder map at the top of the README matches the package tree, both ways."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("```text\npython/octobrain/\n", 1)[1].split("```", 1)[0]
    package = root / "python" / "octobrain"
    folders = {p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    heads = [line.split()[0] for line in block.splitlines() if line[:2] == "  " and line[2] != " "]
    mapped = {head.rstrip("/") for head in heads if head.endswith("/")}
    (leaf_line,) = [line for line in block.splitlines() if "leaves every part may use" in line]
    leaves = {m.strip() for m in leaf_line.split(":", 1)[0].split(",")}
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    assert folders == mapped, (folders, mapped)
    assert modules == leaves, (modules, leaves)
