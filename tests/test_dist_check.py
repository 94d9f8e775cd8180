"""`.ci/check_dist.py`, the gate CI puts on every wheel and sdist before anyone uploads them."""

from __future__ import annotations

import importlib.util
import io
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

CHECKER = Path(__file__).parent.parent / ".ci" / "check_dist.py"
GOOD_WHEEL = [
    "octobrain/__init__.py",
    "octobrain/py.typed",
    "octobrain/_core.pyi",
    "octobrain/_core.abi3.so",
    "octobrain/assets/all-MiniLM-L6-v2/tokenizer.json",
    "octobrain-0.1.0.dist-info/METADATA",
]
GOOD_SDIST = [
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "README.md",
    "rust/Cargo.toml",
    "rust/src/lib.rs",
    "rust/src/python/mod.rs",
    "python/octobrain/__init__.py",
    "python/octobrain/_core.pyi",
    "python/octobrain/py.typed",
]


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_dist", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wheel(tmp_path: Path, name: str, members: list[str]) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        for member in members:
            archive.writestr(member, "x")
    return path


def sdist(tmp_path: Path, members: list[str]) -> Path:
    path = tmp_path / "octobrain-0.1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member in members:
            info = tarfile.TarInfo(f"octobrain-0.1.0/{member}")
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    return path


# A macOS tag: the content rules apply, auditwheel (Linux only) is not consulted.
MAC = "octobrain-0.1.0-cp311-abi3-macosx_10_12_x86_64.macosx_11_0_arm64.macosx_10_12_universal2.whl"


def test_a_clean_wheel_and_sdist_pass(checker: ModuleType, tmp_path: Path) -> None:
    assert checker.main([str(wheel(tmp_path, MAC, GOOD_WHEEL))]) == 0
    assert checker.main([str(sdist(tmp_path, GOOD_SDIST))]) == 0


@pytest.mark.parametrize(
    ("name", "extra", "problem"),
    [
        ("octobrain-0.1.0-cp311-abi3-linux_x86_64.whl", [], "plain linux tag"),
        ("octobrain-0.1.0-cp312-cp312-macosx_11_0_arm64.whl", [], "want one cp311-abi3 wheel"),
        (MAC, ["tests/test_brain.py"], "outside the octobrain package"),
        (MAC, ["octobrain/__pycache__/brain.cpython-311.pyc"], "does not belong in a wheel"),
        (MAC, ["octobrain/benches/bench_bm25.py"], "does not belong in a wheel"),
        (MAC, ["octobrain/_extra.abi3.so"], "exactly one compiled _core module"),
    ],
)
def test_a_wheel_that_could_not_be_published_as_is_fails(
    checker: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    extra: list[str],
    problem: str,
) -> None:
    assert checker.main([str(wheel(tmp_path, name, GOOD_WHEEL + extra))]) == 1
    assert problem in capsys.readouterr().err


def test_a_wheel_missing_the_stub_or_model_files_fails(
    checker: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    members = [m for m in GOOD_WHEEL if not m.endswith(".pyi")]
    assert checker.main([str(wheel(tmp_path, MAC, members))]) == 1
    assert "missing octobrain/_core.pyi" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("members", "problem"),
    [
        ([m for m in GOOD_SDIST if m != "Cargo.lock"], "missing Cargo.lock"),
        ([*GOOD_SDIST, "target/release/libfoo.so"], "does not belong in an sdist"),
        ([*GOOD_SDIST, ".venv/bin/python"], "does not belong in an sdist"),
    ],
)
def test_an_sdist_that_would_not_build_alone_or_carries_local_junk_fails(
    checker: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    members: list[str],
    problem: str,
) -> None:
    assert checker.main([str(sdist(tmp_path, members))]) == 1
    assert problem in capsys.readouterr().err
