"""A deletion file (`memories.lance/_deletions/…`) changed after its commit is named with the
way back, by every command and `doctor`; one without a recorded checksum is unchecked, not
damage (`store.deletion_sums`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from tests.reliability.test_storage_faults import EXE, memorize, octobrain, one_clear_line

RECORD = Path("_octobrain") / "deletions" / "memories.json"


def _db(env: dict[str, str]) -> Path:
    return Path(env["OCTOBRAIN_DATA_DIR"]) / "db"


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, "doctor"], env=env, capture_output=True, text=True, timeout=120)


def _in_one_fragment(env: dict[str, str], tmp_path: Path, n: int = 2) -> list[str]:
    """`n` memories imported in one batch (one fragment, offsets 0 to n - 1); their ids."""
    first = {**env, "OCTOBRAIN_DATA_DIR": str(tmp_path / "first")}
    ids = [memorize(first, f"Fact {i}", f"Durable fact {i} about port {i}080.") for i in range(n)]
    export = tmp_path / "export.jsonl"
    assert octobrain(first, "export", str(export)).returncode == 0
    assert octobrain(env, "import", str(export)).returncode == 0
    return ids


def _flip_offset(env: dict[str, str]) -> Path:
    """Swap the one deleted offset in the memories' deletion file (0 <-> 1)."""
    folder = _db(env) / "memories.lance" / "_deletions"
    # The newest version's: its name holds the version its write read (`{fragment}-{read}-{id}`),
    # which orders them where modification times may tie (kept to the second on some file systems).
    path = max(folder.iterdir(), key=lambda p: int(p.name.split("-")[1]))
    flip_offset(path)
    return path


def flip_offset(path: Path, *, keep_times: bool = True) -> None:
    """Flip the lowest bit of the first offset deletion file `path` lists (`keep_times`: with
    the file's times kept, as a disk's decay leaves them)."""
    data, times = path.read_bytes(), path.stat()
    before = ipc.open_file(pa.py_buffer(data)).read_all().column(0).to_pylist()
    for at in range(0, len(data), 4):
        flipped = bytearray(data)
        flipped[at] ^= 1
        try:
            after = ipc.open_file(pa.py_buffer(bytes(flipped))).read_all().column(0).to_pylist()
        except (pa.ArrowInvalid, OSError):
            continue
        if after == [before[0] ^ 1, *before[1:]]:
            path.write_bytes(bytes(flipped))
            if keep_times:
                os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
            return
    raise AssertionError("no offset found in the deletion file")


def test_a_flipped_offset_in_a_deletion_file_is_named_not_served(
    env: dict[str, str], tmp_path: Path
) -> None:
    # `recent` showed the forgotten memory and hid the other one, `doctor` said ok: the
    # rows' checksums and counts all agree.
    forgotten, kept = _in_one_fragment(env, tmp_path)
    assert octobrain(env, "forget", forgotten, "--yes").returncode == 0
    path = _flip_offset(env)
    named = f"deletion file _deletions/{path.name} is not as it was written"
    for args in (
        ("recent",),
        ("remember", "durable fact"),
        ("memorize", "-t", "A new note", "-c", "x" * 20),
    ):
        done = octobrain(env, *args)
        assert done.returncode == 1, (args, done.stdout)
        line = one_clear_line(done.stderr)
        assert named in line and "memory restore 2 --yes" in line, line
    doctor = _doctor(env)
    assert doctor.returncode == 1 and named in doctor.stdout, doctor.stdout
    assert "repair: `octobrain memory restore 2 --yes`" in doctor.stdout
    history = octobrain(env, "history", "--format", "json", scoped=False)
    marked = {v["version"]: v.get("damage", "") for v in json.loads(history.stdout)}
    assert named in marked[3] and not marked[2], marked
    assert octobrain(env, "restore", "2", "--yes", scoped=False).returncode == 0
    assert octobrain(env, "forget", forgotten, "--yes").returncode == 0
    shown = octobrain(env, "recent", "--format", "json")
    assert [m["id"] for m in json.loads(shown.stdout)] == [kept]
    assert _doctor(env).returncode == 0


def test_a_deletion_file_with_no_record_is_unchecked_not_damage(
    env: dict[str, str], tmp_path: Path
) -> None:
    # As a process killed between its commit and the record leaves the store (the record of
    # the version before), a record changed on disk, or an octobrain that kept none: said,
    # never called damage.
    first, second, kept = _in_one_fragment(env, tmp_path, 3)
    record = _db(env) / RECORD
    assert octobrain(env, "forget", first, "--yes").returncode == 0
    before = record.read_bytes()
    assert octobrain(env, "forget", second, "--yes").returncode == 0
    now = json.loads(record.read_text())
    now["files"] = {path: "0" * 64 for path in now["files"]}  # (its own sum no longer matches)
    for left in (before, json.dumps(now).encode(), None):
        if left is None:
            record.unlink()
        else:
            record.write_bytes(left)
        doctor = _doctor(env)
        assert doctor.returncode == 0, doctor.stdout
        assert "memories: 1 deletion file with no checksum recorded" in doctor.stdout
        assert "the next write to the table records it\n" in doctor.stdout  # (said "them")
        shown = octobrain(env, "recent", "--format", "json")
        assert [m["id"] for m in json.loads(shown.stdout)] == [kept], shown.stderr
    memorize(env, "Next note", "A later write records the deletion file it reads.")
    assert "no checksum recorded" not in _doctor(env).stdout
    _flip_offset(env)
    assert _doctor(env).returncode == 1


def test_concurrent_forgets_keep_every_record(env: dict[str, str], tmp_path: Path) -> None:
    # Each writer records after its commits, under the write lock: none drops another's.
    ids = _in_one_fragment(env, tmp_path, 6)
    runs = [
        subprocess.Popen(
            [EXE, "memory", "--scope", "github.com/acme/api", "forget", memory_id, "--yes"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for memory_id in ids[:4]
    ]
    assert all(run.wait(timeout=120) == 0 for run in runs)
    recorded = json.loads((_db(env) / RECORD).read_text())["files"]
    on_disk = {f"_deletions/{p.name}" for p in (_db(env) / "memories.lance/_deletions").iterdir()}
    assert set(recorded) <= on_disk and len(recorded) == 1, recorded
    doctor = _doctor(env)
    assert doctor.returncode == 0 and "no checksum recorded" not in doctor.stdout, doctor.stdout


def test_a_deletion_file_only_an_older_version_reads_is_checked(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A second forget in the fragment replaces its deletion file: the record dropped the
    # first one, still read by the version before. Flipped, history listed that version as
    # sound, `restore` to it succeeded and recorded the file as it now is: the forgotten
    # memory shown again, another hidden, doctor ok.
    first, second, kept = _in_one_fragment(env, tmp_path, 3)
    assert octobrain(env, "forget", first, "--yes").returncode == 0
    folder = _db(env) / "memories.lance" / "_deletions"
    (older,) = folder.iterdir()
    assert octobrain(env, "forget", second, "--yes").returncode == 0
    flip_offset(older)
    named = f"deletion file _deletions/{older.name} is not as it was written"
    history = octobrain(env, "history", "--format", "json", scoped=False)
    marked = {v["version"]: v.get("damage", "") for v in json.loads(history.stdout)}
    assert named in marked[3] and not marked[4], marked
    refused = octobrain(env, "restore", "3", "--yes", scoped=False)
    assert refused.returncode == 2 and named in one_clear_line(refused.stderr), refused.stderr
    shown = octobrain(env, "recent", "--format", "json")
    assert [m["id"] for m in json.loads(shown.stdout)] == [kept], shown.stderr
    assert _doctor(env).returncode == 0
