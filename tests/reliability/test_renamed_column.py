"""A byte of a table's newest version manifest changed on disk inside a column's name
("importance" reads "impnrtance"): every command is one line sending the user to `doctor`,
which names the table and the way back, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line


def _rename_in_newest_manifest(env: dict[str, str], column: bytes) -> None:
    versions = Path(env["OCTOBRAIN_DATA_DIR"]) / "db" / "memories.lance" / "_versions"
    newest = max(versions.glob("*.manifest"), key=lambda f: (f.stat().st_mtime_ns, f.name))
    data = bytearray(newest.read_bytes())
    at = data.index(column)
    data[at + 3] ^= 0x01  # "importance" -> "impnrtance"
    newest.write_bytes(bytes(data))


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_column_renamed_by_a_changed_byte_is_named_and_restored(env: dict[str, str]) -> None:
    # `remember`, `recent` and `memorize` printed LanceDB's ValueError ("No field named
    # importance") as a traceback, and `doctor` its own KeyError.
    for i in range(3):
        memorize(env, f"Fact {i}", f"Durable fact number {i} about the API.")
    _rename_in_newest_manifest(env, b"importance")
    for args in (
        ("recent",),
        ("remember", "durable fact"),
        ("memorize", "-t", "Fact 4", "-c", "x" * 20),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        line = one_clear_line(done.stderr)
        assert "memories: its newest version names column(s) 'impnrtance'" in line, line
        assert "in place of 'importance'" in line and "memory restore" in line, line
    doctor = _doctor(env)
    assert doctor.returncode == 1 and "in place of 'importance'" in doctor.stdout, doctor.stdout
    history = octobrain(env, "history", "--format", "json", scoped=False)
    assert history.returncode == 0, history.stderr
    before = sorted(v["version"] for v in json.loads(history.stdout))[-2]
    assert octobrain(env, "restore", str(before), "--yes", scoped=False).returncode == 0
    assert _doctor(env).returncode == 0
    assert octobrain(env, "recent").returncode == 0
