"""A store data file changed in place after a snapshot recorded it (a byte flipped inside a
page, its size and footer intact) is never answered from the snapshot's good copy: the
snapshot is not used, and the store's read names the damage, as with no snapshot."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from octobrain.memory.snapshot import _manifest_crc
from tests.server_support import octobrain_cmd, server_env

SCOPE = "github.com/acme/api"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "config.toml").write_text("[search]\nsnapshot_min_rows = 1\n")
    return server_env(
        data, OCTOBRAIN_SERVICE_ENABLED="0", OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED="false"
    )


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        octobrain_cmd("memory", "--scope", SCOPE, *args),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _store_with_snapshot(env: dict[str, str]) -> dict[str, str]:
    """Six memories and a current snapshot of them; their ids by title."""
    for i in range(6):
        done = _run(env, "memorize", "-t", f"Fact {i}", "-c", f"Durable fact number {i} here.")
        assert done.returncode == 0, done.stderr
    listed = _run(env, "recent", "--format", "json")
    assert _run(env, "remember", "durable").returncode == 0  # (leaves the snapshot current)
    return {m["title"]: m["id"] for m in json.loads(listed.stdout)}


@pytest.mark.parametrize("command", [("recent",), ("remember", "durable"), ("get", "{id}")])
def test_a_data_file_changed_in_place_is_not_answered_from_the_snapshot(
    env: dict[str, str], command: tuple[str, ...]
) -> None:
    # The snapshot checked each file's size and footer only: `get`, `recent` and `remember`
    # answered from its copy, exit 0, while `doctor` and every read of the store said the
    # memory no longer matched its checksum.
    ids = _store_with_snapshot(env)
    data = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / "data"
    [file] = [f for f in data.glob("*.lance") if b"number 4 here" in f.read_bytes()]
    with file.open("r+b") as f:  # one byte of the content, in place: size and footer kept
        at = file.read_bytes().index(b"number 4 here")
        f.seek(at + 7)
        f.write(b"5")
    done = _run(env, *(arg.format(id=ids["Fact 4"]) for arg in command))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"memory {ids['Fact 4']} no longer matches the checksum" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_snapshot_written_before_the_times_were_recorded_is_still_served(
    env: dict[str, str],
) -> None:
    ids = _store_with_snapshot(env)
    [where] = (Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots").glob("*/v*/manifest.json")
    manifest = json.loads(where.read_text())
    del manifest["data_times"], manifest["crc"]
    manifest["crc"] = _manifest_crc(manifest)
    where.write_text(json.dumps(manifest))
    done = _run(env, "get", ids["Fact 4"])
    assert done.returncode == 0 and "number 4 here" in done.stdout, done.stderr
    assert "not used" not in done.stderr and "damaged" not in done.stderr, done.stderr
