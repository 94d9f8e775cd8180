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


def _flip(env: dict[str, str], text: bytes) -> None:
    """Change one byte of `text` in the memories data file holding it, in place (its size and
    footer kept)."""
    data = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / "data"
    [file] = [f for f in data.glob("*.lance") if text in f.read_bytes()]
    with file.open("r+b") as f:
        f.seek(file.read_bytes().index(text) + 7)
        f.write(b"5")


def _refused(done: subprocess.CompletedProcess[str], memory: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"memory {memory} no longer matches the checksum" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("command", [("recent",), ("remember", "durable"), ("get", "{id}")])
def test_a_data_file_changed_in_place_is_not_answered_from_the_snapshot(
    env: dict[str, str], command: tuple[str, ...]
) -> None:
    # The snapshot checked each file's size and footer only: `get`, `recent` and `remember`
    # answered from its copy, exit 0, while `doctor` and every read of the store said the
    # memory no longer matched its checksum.
    ids = _store_with_snapshot(env)
    _flip(env, b"number 4 here")
    _refused(_run(env, *(arg.format(id=ids["Fact 4"]) for arg in command)), ids["Fact 4"])


def test_a_data_file_a_tail_recorded_changed_in_place_is_not_answered_from_the_tail(
    env: dict[str, str],
) -> None:
    # A memory written after the snapshot is replayed from the tail its writer left: its
    # file's size and footer were checked, not its time, and `get` answered from the tail.
    _store_with_snapshot(env)
    done = _run(env, "memorize", "-t", "Fact 6", "-c", "Durable fact number 6 here.")
    assert done.returncode == 0, done.stderr
    assert list((Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots").glob("*/v*/tail-*"))
    [memory] = [
        m["id"]
        for m in json.loads(_run(env, "recent", "--format", "json").stdout)
        if m["title"] == "Fact 6"
    ]
    _flip(env, b"number 6 here")
    _refused(_run(env, "get", memory), memory)


@pytest.mark.parametrize("written", ["without times", "with data_times beside"])
def test_a_snapshot_written_before_the_times_were_recorded_is_still_served(
    env: dict[str, str], written: str
) -> None:
    # Recorded as (path, size) pairs, and (for an hour) their times under `data_times`.
    ids = _store_with_snapshot(env)
    [where] = (Path(env["OCTOBRAIN_DATA_DIR"]) / "cache" / "snapshots").glob("*/v*/manifest.json")
    manifest = json.loads(where.read_text())
    del manifest["crc"]
    files = manifest["data_files"]
    manifest["data_files"] = {name: [f[:2] for f in listed] for name, listed in files.items()}
    if written == "with data_times beside":
        manifest["data_times"] = {name: {f[0]: 1 for f in listed} for name, listed in files.items()}
    manifest["crc"] = _manifest_crc(manifest)
    where.write_text(json.dumps(manifest))
    done = _run(env, "get", ids["Fact 4"])
    assert done.returncode == 0 and "number 4 here" in done.stdout, done.stderr
    assert "not used" not in done.stderr and "damaged" not in done.stderr, done.stderr
