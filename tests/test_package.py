"""The installed package: version source, cheap imports, console script."""

from __future__ import annotations

import importlib.metadata
import json
import pkgutil
import shutil
import subprocess
import sys
import sysconfig

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


def test_help_does_not_load_heavy_dependencies() -> None:
    code = (
        "import json, sys\n"
        "from octobrain.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
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
