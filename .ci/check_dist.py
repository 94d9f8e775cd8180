"""Check built distributions before anyone uploads them: `python .ci/check_dist.py dist/*`.

A wheel must carry an abi3 tag PyPI accepts (manylinux/musllinux on Linux, and `auditwheel show`
must agree the binary meets that tag's policy), hold only the `octobrain` package and its
metadata (no tests, benchmarks, caches or bytecode), exactly one compiled `_core` module, and
stay under a size limit. An sdist must hold what a build from it needs with only a Rust
toolchain (workspace and crate manifests, Cargo.lock, the Rust and Python sources) and nothing
local (target/, virtualenvs, caches). Prints one line per file; exits 1 on the first problem.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

WHEEL_MAX_BYTES = 8 * 1024 * 1024
SDIST_MAX_BYTES = 4 * 1024 * 1024
# Path parts that never belong in a distribution.
FORBIDDEN_PARTS = frozenset(
    {
        "tests",
        "benches",
        "__pycache__",
        ".pytest_cache",
        ".hypothesis",
        ".benchmarks",
        ".mypy_cache",
        ".ruff_cache",
        ".git",
        ".github",
        ".venv",
        "target",
        "dist",
    }
)
FORBIDDEN_SUFFIXES = (".pyc", ".pyo", ".whl", ".tar.gz")
WHEEL_REQUIRED = (
    "octobrain/__init__.py",
    "octobrain/py.typed",
    "octobrain/_core.pyi",
    "octobrain/assets/all-MiniLM-L6-v2/tokenizer.json",
)
SDIST_REQUIRED = (
    "pyproject.toml",
    "Cargo.toml",
    "Cargo.lock",
    "rust/Cargo.toml",
    "rust/src/lib.rs",
    "rust/src/python/mod.rs",
    "python/octobrain/__init__.py",
    "python/octobrain/_core.pyi",
    "python/octobrain/py.typed",
    "README.md",
)
WHEEL_NAME = re.compile(
    r"^octobrain-(?P<version>[^-]+)-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$"
)
POLICY = re.compile(r"(?P<family>manylinux|musllinux)_(?P<major>\d+)_(?P<minor>\d+)_")


class DistProblem(Exception):
    """What is wrong with one distribution file."""


def _bad_parts(name: str) -> list[str]:
    parts = PurePosixPath(name).parts
    return [p for p in parts if p in FORBIDDEN_PARTS]


def _policy_floor(tag: str) -> tuple[str, int, int] | None:
    found = POLICY.match(tag)
    if found is None:
        return None
    return found["family"], int(found["major"]), int(found["minor"])


def check_wheel_tag(filename: str) -> list[str]:
    """The wheel's platform tags; raises unless the tag is abi3 and uploadable."""
    found = WHEEL_NAME.match(filename)
    if found is None:
        raise DistProblem(f"{filename}: not a wheel file name octobrain-V-PY-ABI-PLATFORM.whl")
    if found["abi"] != "abi3" or found["python"] != "cp311":
        raise DistProblem(
            f"{filename}: want one cp311-abi3 wheel, got {found['python']}-{found['abi']}"
        )
    platforms = found["platform"].split(".")
    if any(p.startswith("linux_") for p in platforms):
        raise DistProblem(
            f"{filename}: plain linux tag {found['platform']!r}; PyPI accepts only "
            "manylinux/musllinux wheels (set [tool.maturin] compatibility)"
        )
    return platforms


def check_auditwheel(path: Path, platforms: list[str]) -> str:
    """Run `auditwheel show`; its policy must not be newer than the one the tag claims."""
    linux = [p for p in platforms if _policy_floor(p) is not None]
    if not linux:
        return "not a Linux wheel"
    done = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    report = " ".join((done.stdout + done.stderr).split())
    found = re.search(r'consistent with the following platform tag: "([^"]+)"', report)
    if done.returncode != 0 or found is None:
        raise DistProblem(f"{path.name}: auditwheel show failed: {report[:500]}")
    needed = _policy_floor(found[1])
    claimed = min(f for p in linux if (f := _policy_floor(p)) is not None)
    if needed is None or needed[0] != claimed[0] or needed[1:] > claimed[1:]:
        raise DistProblem(
            f"{path.name}: tagged {linux[0]} but auditwheel says the binary needs {found[1]}"
        )
    return f"auditwheel: consistent with {found[1]}"


def check_wheel(path: Path) -> str:
    """Every rule for one wheel; returns a one-line summary."""
    platforms = check_wheel_tag(path.name)
    size = path.stat().st_size
    if size > WHEEL_MAX_BYTES:
        raise DistProblem(f"{path.name}: {size:,} bytes, over the {WHEEL_MAX_BYTES:,} limit")
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
    version = WHEEL_NAME.match(path.name)["version"]  # type: ignore[index]
    top = {"octobrain", f"octobrain-{version}.dist-info"}
    for name in names:
        head = PurePosixPath(name).parts[0]
        if head not in top:
            raise DistProblem(f"{path.name}: {name} is outside the octobrain package")
        if _bad_parts(name) or name.endswith(FORBIDDEN_SUFFIXES):
            raise DistProblem(f"{path.name}: {name} does not belong in a wheel")
    missing = [n for n in WHEEL_REQUIRED if n not in names]
    if missing:
        raise DistProblem(f"{path.name}: missing {', '.join(missing)}")
    extensions = [n for n in names if re.search(r"\.(so|pyd|dylib)$", n)]
    if [PurePosixPath(n).name.split(".")[0] for n in extensions] != ["_core"]:
        raise DistProblem(f"{path.name}: want exactly one compiled _core module, got {extensions}")
    audit = check_auditwheel(path, platforms)
    return f"{path.name}: {len(names)} files, {size / 1e6:.1f} MB, {audit}"


def check_sdist(path: Path) -> str:
    """Every rule for one sdist; returns a one-line summary."""
    size = path.stat().st_size
    if size > SDIST_MAX_BYTES:
        raise DistProblem(f"{path.name}: {size:,} bytes, over the {SDIST_MAX_BYTES:,} limit")
    root = path.name.removesuffix(".tar.gz")
    with tarfile.open(path) as archive:
        names = [m.name for m in archive.getmembers() if m.isfile()]
    inner = []
    for name in names:
        if not name.startswith(f"{root}/"):
            raise DistProblem(f"{path.name}: {name} is outside {root}/")
        rel = name[len(root) + 1 :]
        if _bad_parts(rel) or rel.endswith(FORBIDDEN_SUFFIXES):
            raise DistProblem(f"{path.name}: {rel} does not belong in an sdist")
        inner.append(rel)
    missing = [n for n in SDIST_REQUIRED if n not in inner]
    if missing:
        raise DistProblem(f"{path.name}: missing {', '.join(missing)}")
    return f"{path.name}: {len(inner)} files, {size / 1e6:.1f} MB"


def main(argv: list[str]) -> int:
    """Check each file named on the command line."""
    if not argv:
        print("usage: check_dist.py DIST_FILE...", file=sys.stderr)
        return 2
    for arg in argv:
        path = Path(arg)
        try:
            if path.name.endswith(".whl"):
                print(f"ok  {check_wheel(path)}")
            elif path.name.endswith(".tar.gz"):
                print(f"ok  {check_sdist(path)}")
            else:
                raise DistProblem(f"{path.name}: neither a wheel nor an sdist")
        except DistProblem as problem:
            print(f"error: dist: {problem}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
