"""A team's store on S3 reached with the keys of a named AWS profile (~/.aws/credentials or
~/.aws/config, `AWS_PROFILE`), the way most people hold them: LanceDB's open takes them, and so
must octobrain's own requests (the write lease, the `_octobrain/*` records).

The loopback S3 endpoint of `test_object_store`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.object_store_support import S3, SCOPE, cli_env, machine, s3  # noqa: F401 (fixtures)

MEMORIZE = (sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, "memorize")
KEYS = "aws_access_key_id = test\naws_secret_access_key = test\n"


def _memorize(
    endpoint: S3, tmp_path: Path, home: Path, **aws: str
) -> subprocess.CompletedProcess[str]:
    """`octobrain memory memorize` into a fresh bucket, as a process whose AWS settings are
    only `aws` (and what is under `home`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(cli_env(endpoint, f"s3://{endpoint.bucket()}/octobrain"), HOME=str(home), **aws)
    env["OCTOBRAIN_DATA_DIR"] = str(tmp_path / "machine")
    env.pop("OCTOBRAIN_CONFIG_PATH", None)
    return subprocess.run(
        [*MEMORIZE, "--title", "Deploy rule", "--content", "Production deploys need review."],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _home(tmp_path: Path, name: str, text: str) -> Path:
    """A home directory holding ~/.aws/`name` with `text`."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / name).write_text(text)
    return home


@pytest.mark.parametrize(
    ("name", "section", "moved"),
    [
        ("credentials", "[team]", None),
        ("config", "[profile team]", None),
        ("credentials", "[team]", "AWS_SHARED_CREDENTIALS_FILE"),
        ("config", "[profile team]", "AWS_CONFIG_FILE"),
    ],
)
def test_a_named_profile_reaches_a_bucket(
    machine: S3,  # noqa: F811
    tmp_path: Path,
    name: str,
    section: str,
    moved: str | None,
) -> None:
    # Before: LanceDB opened the store with the profile's keys, then the write lease (obstore,
    # which reads no profile) asked the instance metadata service and failed: 'no AWS
    # credentials: set AWS_ACCESS_KEY_ID …'.
    home = _home(tmp_path, name, f"{section}\n{KEYS}")
    aws = {"AWS_PROFILE": "team"}
    if moved is not None:  # the file elsewhere, named by its variable
        aws[moved] = str((home / ".aws" / name).rename(tmp_path / "elsewhere"))
    done = _memorize(machine, tmp_path, home, **aws)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_profile_that_does_not_exist_is_named(
    machine: S3,  # noqa: F811
    tmp_path: Path,
) -> None:
    home = _home(tmp_path, "credentials", f"[team]\n{KEYS}")
    done = _memorize(machine, tmp_path, home, AWS_PROFILE="taem")
    assert done.returncode == 1
    _uri, said = re.fullmatch(
        r"error: store: cannot open (\S+): (.*)", done.stderr.strip().splitlines()[-1]
    ).groups()  # type: ignore[union-attr]
    assert said == (
        "no AWS credentials from the profile 'taem' (AWS_PROFILE): check that "
        "~/.aws/credentials or ~/.aws/config holds it, with its keys"
    )
