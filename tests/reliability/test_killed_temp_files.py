"""A LanceDB write killed half-way leaves its temporary file (`data/.tmpXXXXXX`, empty or tens
of MB) in the table's folder for good: LanceDB's cleanup never removes it. `doctor` names the
ones over an hour old, `doctor --drop-temporary-files` deletes them and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.reliability.damage_support import run_cli
from tests.reliability.kills import SCOPE

# A writer adding 16 MB batches to a table of the store, for as long as it lives.
WRITER = textwrap.dedent(
    """
    import sys
    import lancedb, pyarrow as pa

    table = lancedb.connect(sys.argv[1]).create_table("scratch", pa.table({"v": [0.0]}))
    batch = pa.table({"v": pa.array(range(2_000_000), pa.float64())})
    print("ready", flush=True)
    while True:
        table.add(batch)
    """
)


def _temporary(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob(".tmp*") if len(p.name) == 10)


def _killed_writer(store: Path) -> list[Path]:
    """SIGKILL a LanceDB writer while its temporary file is there: what it left."""
    data = store / "scratch.lance" / "data"
    for _ in range(5):  # (a file seen may be renamed into place just before the kill)
        with subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store)], stdout=subprocess.PIPE, text=True
        ) as writer:
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
            while not _temporary(data):
                time.sleep(0.005)
            writer.send_signal(signal.SIGKILL)
        if _temporary(data):
            return _temporary(data)
    raise AssertionError("no write was cut short")


def _files(store: Path) -> dict[str, int]:
    """The tables' files but their temporaries, with their sizes."""
    return {
        str(p.relative_to(store)): p.stat().st_size
        for p in store.glob("*.lance/**/*")
        if p.is_file() and not p.name.startswith(".tmp")
    }


def test_doctor_names_the_temporary_files_of_killed_writes_and_drops_only_those(
    env: dict[str, str],
) -> None:
    for n in range(2):
        memorize = ("memorize", "-t", f"Kept note {n}", "-c", f"Fact number {n} stays.")
        assert run_cli(env, "memory", "--scope", SCOPE, *memorize)[0] == 0
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    left = _killed_writer(store)
    data = store / "memories.lance" / "data"
    planted = data / ".tmpAb3dE9"  # the form LanceDB's temporaries take, empty
    planted.touch()
    kept = [data / ".tmpAb3", data / "x.tmpAb3dE9"]  # not its form
    for path in kept:
        path.touch()
    data_file = next(data.glob("*.lance"))
    (data / ".tmpQw3rT7").symlink_to(data_file)  # a link is never followed nor removed
    kept.append(data / ".tmpQw3rT7")

    rc, out, _ = run_cli(env, "doctor", "--format", "json")  # new: may be writes under way
    assert rc == 0 and json.loads(out)["problems"] == [], out

    hour_ago = time.time() - 3700
    for path in [*left, planted, *kept]:
        os.utime(path, (hour_ago, hour_ago), follow_symlinks=False)
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    assert rc == 1
    problems = {p["table"]: p for p in json.loads(out)["problems"]}
    assert set(problems) == {"memories", "scratch"}, problems
    assert problems["memories"]["problem"].startswith("1 temporary file(s) of 0 bytes")
    assert problems["scratch"]["problem"].startswith(f"{len(left)} temporary file(s)")
    assert "doctor --drop-temporary-files" in problems["scratch"]["repair"]

    before = _files(store)
    rc, out, err = run_cli(env, "doctor", "--drop-temporary-files")
    assert rc == 0, out + err
    assert f"{len(left) + 1} temporary file(s) of" in err, err
    assert not any(p.exists() for p in [*left, planted])
    assert all(p.is_symlink() or p.exists() for p in kept)
    assert _files(store) == before  # every data file as it was
    rc, out, _ = run_cli(env, "memory", "--scope", SCOPE, "recent", "--format", "json")
    assert rc == 0 and len(json.loads(out)) == 2


# A LanceDB write (of a program that takes no octobrain lock) paused once its temporary
# file is made: LanceDB holds the rows in memory, so the file keeps its creation's time.
PAUSED = textwrap.dedent(
    """
    import sys
    import lancedb, pyarrow as pa

    from pathlib import Path

    table = lancedb.connect(sys.argv[1]).create_table("scratch", pa.table({"v": [0.0]}))
    data = Path(sys.argv[1]) / "scratch.lance" / "data"
    sent = []

    def batches():
        for i in range(1000):
            sent.append(i)
            yield pa.RecordBatch.from_pydict({"v": [float(i)]}, schema=table.schema)
            if any(p.name.startswith(".tmp") for p in data.iterdir()):
                print("paused", flush=True)
                sys.stdin.readline()
                return

    try:
        table.add(pa.RecordBatchReader.from_batches(table.schema, batches()))
    except Exception as exc:
        print(f"failed: {exc}", flush=True)
    else:
        print("landed" if table.count_rows() == 1 + len(sent) else "lost rows", flush=True)
    """
)


def test_drop_temporary_files_leaves_one_a_paused_write_holds_open(
    env: dict[str, str],
) -> None:
    # Before: a write paused over an hour by a program that takes no octobrain lock had its
    # file named and deleted, and failed on resuming ('failed to persist temp file'). Now a
    # file a process holds open is neither, and the write lands.
    memorize = ("memorize", "-t", "Kept note", "-c", "A fact that stays.")
    assert run_cli(env, "memory", "--scope", SCOPE, *memorize)[0] == 0
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    with subprocess.Popen(
        [sys.executable, "-c", PAUSED, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        assert writer.stdout.readline() == "paused\n"
        (held,) = _temporary(store / "scratch.lance" / "data")
        hour_ago = time.time() - 3700
        os.utime(held, (hour_ago, hour_ago))
        rc, out, _ = run_cli(env, "doctor", "--format", "json")
        assert rc == 0 and json.loads(out)["problems"] == [], out
        rc, _, err = run_cli(env, "doctor", "--drop-temporary-files")
        assert rc == 0 and "0 temporary file(s)" in err, err
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "landed\n"
    assert not held.exists()  # (renamed into place)
