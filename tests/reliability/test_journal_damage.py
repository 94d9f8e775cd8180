"""A consolidation record carries a checksum (`store.journal_rows`): a bit flipped on disk in a
member id read back as another id, and `unconsolidate` restored the members it still found,
called the group undone and left the other consolidated for good; `doctor` said ok. A forgotten
turn's record too (`store.forgotten`): its id read changed, the next ingest brought it back."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import lancedb
import pytest

from octobrain.store import schema
from octobrain.store.journal_rows import record_verified
from tests.consolidation_support import TWINS
from tests.reliability.damage_support import run_cli, store_dir
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line


def _merged(env: dict[str, str], texts: Sequence[str] = TWINS[:2]) -> tuple[str, list[str]]:
    """Two near-copies merged by a sleep pass: the parent's id and the members'."""
    ids = [memorize(env, "Deploy pipeline", text) for text in texts]
    done = octobrain(
        env, "sleep-consolidate", "--threshold", "0.9", "--min-size", "2", "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    [merge] = json.loads(done.stdout)["consolidations"]
    assert sorted(m["id"] for m in merge["members"]) == sorted(ids)
    return str(merge["parent"]["id"]), ids


def _flip_in_journal(env: dict[str, str], found: str, table: str = "consolidations") -> None:
    """Flip the low bit of the last byte of `found` in every data file of `table` holding it."""
    held = 0
    for path in (store_dir(env) / f"{table}.lance" / "data").glob("*.lance"):
        raw = bytearray(path.read_bytes())
        at = raw.find(found.encode())
        if at >= 0:
            raw[at + len(found) - 1] ^= 0x01
            path.write_bytes(bytes(raw))
            held += 1
    assert held >= 1


def _states(env: dict[str, str], ids: list[str]) -> list[str]:
    table = lancedb.connect(str(store_dir(env))).open_table("memories")
    rows = {r["id"]: r["state"] for r in table.to_arrow().select(["id", "state"]).to_pylist()}
    return [rows[i] for i in ids]


def test_a_damaged_record_is_named_and_never_undone_in_part(env: dict[str, str]) -> None:
    parent, ids = _merged(env)
    _flip_in_journal(env, ids[1])
    done = octobrain(env, "unconsolidate", parent)
    assert done.returncode == 1, done.stdout  # was: "restored 1 memory", exit 0
    line = one_clear_line(done.stderr)
    assert "'consolidations' is damaged" in line and "consolidation record" in line, line
    assert "octobrain doctor" in line, line
    # was: "…; it is not shown", the wording of a read: an undo refused changed nothing
    assert "nothing was changed" in line and "not shown" not in line, line
    assert _states(env, ids) == ["consolidated", "consolidated"]  # nothing undone in part

    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    assert rc == 1 and not report["ok"]
    [problem] = report["problems"]
    assert problem["table"] == "consolidations" and "no longer matches" in problem["problem"]
    assert "--recreate consolidations" in problem["repair"], problem
    # The repair doctor names: the journal started over; the memories stay as they are.
    assert run_cli(env, "doctor", "--recreate", "consolidations")[0] == 0
    assert run_cli(env, "doctor")[0] == 0


def test_a_journal_started_over_leaves_no_record_of_the_old_one_s_deletion_files(
    env: dict[str, str],
) -> None:
    # `doctor --recreate` reset the table's recorded newest version but kept the checksums
    # of the deletion files the old table read, in `_octobrain/deletions/consolidations.json`.
    database = "Postgres 16 is the primary database; Redis only caches sessions."
    ids = [memorize(env, "Primary database", t) for t in (database, f"{database[:-1]}!")]
    for text in TWINS[:2]:
        memorize(env, "Deploy pipeline", text)
    done = octobrain(
        env, "sleep-consolidate", "--threshold", "0.9", "--min-size", "2", "--format", "json"
    )
    merges = json.loads(done.stdout)["consolidations"]  # (two records, one commit)
    assert len(merges) == 2, done.stdout
    # (one of the two undone: its update leaves a deletion file)
    assert octobrain(env, "unconsolidate", str(merges[0]["parent"]["id"])).returncode == 0
    sums = store_dir(env) / "_octobrain" / "deletions" / "consolidations.json"
    assert sums.exists()
    _flip_in_journal(env, ids[1])
    assert run_cli(env, "doctor", "--recreate", "consolidations")[0] == 0
    assert run_cli(env, "doctor")[0] == 0
    assert not sums.exists()


def test_an_old_journal_gains_checksums_with_the_next_write(env: dict[str, str]) -> None:
    # A journal made before the column is read unchecked; the next write adds the column and
    # computes each record's as it is then, after which a flipped bit is named.
    parent, ids = _merged(env)
    lancedb.connect(str(store_dir(env))).open_table("consolidations").drop_columns(
        [schema.CHECKSUM]
    )
    assert run_cli(env, "doctor")[0] == 0
    memorize(env, "Primary database", "Postgres 16 is the primary database.")
    assert octobrain(env, "unconsolidate", parent).returncode == 0  # (reads it, then writes)
    journal = lancedb.connect(str(store_dir(env))).open_table("consolidations")
    [row] = journal.to_arrow().to_pylist()
    assert record_verified(row) is True and row["status"] == "reverted"
    _flip_in_journal(env, ids[0])
    assert run_cli(env, "doctor")[0] == 1


def test_a_damaged_forgotten_turn_is_named_not_brought_back(
    env: dict[str, str], tmp_path: Path
) -> None:
    chat = tmp_path / "chat.json"
    said = [{"speaker": "A", "text": "The staging password is hunter2-orange-kettle."}]
    chat.write_text(json.dumps(said))
    assert octobrain(env, "ingest", str(chat)).returncode == 0
    done = octobrain(env, "recent", "--format", "json")
    [turn] = [m["id"] for m in json.loads(done.stdout)]
    assert octobrain(env, "forget", turn, "--yes").returncode == 0
    _flip_in_journal(env, turn, "forgotten_turns")

    done = octobrain(env, "ingest", str(chat))  # was: "1 turn added", the password back
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "'forgotten_turns' is damaged" in line and "octobrain doctor" in line, line
    assert "nothing was changed" in line and "not shown" not in line, line
    assert "hunter2" not in octobrain(env, "recent").stdout
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    [problem] = json.loads(out)["problems"]
    assert rc == 1 and problem["table"] == "forgotten_turns", problem
    assert "forgotten turn" in problem["problem"] and "--recreate" in problem["repair"]


def test_sleep_never_merges_again_what_a_damaged_record_kept_apart(env: dict[str, str]) -> None:
    # An undone consolidation keeps its members apart (`not_to_cluster`); its record's status
    # changed on disk ("reverted" → "revertee") was not selected, and the next sleep pass
    # merged them again, exit 0, against the undo.
    parent, ids = _merged(env)
    assert octobrain(env, "unconsolidate", parent).returncode == 0
    _flip_in_journal(env, "reverted")
    done = octobrain(env, "sleep-consolidate", "--threshold", "0.9", "--min-size", "2")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert "'consolidations' is damaged" in line and "octobrain doctor" in line, line
    assert _states(env, ids) == ["working", "working"]  # nothing merged


WEB = "github.com/acme/web"


def _sleep_in(env: dict[str, str], scope: str) -> subprocess.CompletedProcess[str]:
    args = ("sleep-consolidate", "--threshold", "0.9", "--min-size", "2", "--format", "json")
    return octobrain(env, "--scope", scope, *args, scoped=False)


def _twins_in(env: dict[str, str], scope: str) -> None:
    for text in TWINS[:2]:
        made = octobrain(
            env, "--scope", scope, "memorize", "-t", "Deploys", "-c", text, scoped=False
        )
        assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("status", ["done", "pending"])
def test_a_damaged_record_stops_sleep_in_its_own_scope_only(
    env: dict[str, str], status: str
) -> None:
    # A record of one project damaged (a member id flipped; done, or left pending by a kill)
    # stopped the sleep pass of every project, exit 1 ("'consolidations' is damaged"): its
    # own is stopped, the others merge and name it.
    _parent, ids = _merged(env)
    journal = lancedb.connect(str(store_dir(env))).open_table("consolidations")
    [record] = journal.to_arrow()["id"]
    if status != "done":
        journal.update(values={"status": status})  # (a status is not in the checksum)
    _flip_in_journal(env, ids[1])
    _twins_in(env, WEB)
    done = _sleep_in(env, WEB)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert len(report["consolidations"]) == 1
    assert report["damaged_records"] == [str(record)]
    # A forget there too: each one first repairs what a killed consolidation left (was:
    # exit 1 on the other project's pending record).
    parent = report["consolidations"][0]["parent"]["id"]
    gone = octobrain(env, "--scope", WEB, "forget", parent, "--yes", scoped=False)
    assert gone.returncode == 0, gone.stderr
    ops = WEB.replace("web", "ops")
    _twins_in(env, ops)
    said = octobrain(env, "--scope", ops, "sleep-consolidate", "--threshold", "0.9", scoped=False)
    assert said.returncode == 0, said.stderr
    assert f"consolidation record {record}" in said.stdout and "octobrain doctor" in said.stdout
    _twins_in(env, "github.com/acme/api")
    own = _sleep_in(env, "github.com/acme/api")
    assert own.returncode == 1, own.stdout
    assert "'consolidations' is damaged" in one_clear_line(own.stderr)


def test_a_record_whose_scope_cannot_be_known_stops_every_sleep(env: dict[str, str]) -> None:
    # Its scope changed on disk ("…/api" → "…/aph"): the memories it names read another, so
    # where it belongs is not known and no pass may pass it over.
    _merged(env)
    _flip_in_journal(env, "github.com/acme/api")
    _twins_in(env, WEB)
    done = _sleep_in(env, WEB)
    assert done.returncode == 1, done.stdout
    assert "'consolidations' is damaged" in one_clear_line(done.stderr)


def test_forget_damaged_takes_out_the_damaged_records_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A flipped bit in one consolidation record or one forgotten turn: `doctor
    # --forget-damaged` left both (memories only), exit 1; the way out was `--recreate`,
    # which lost every record (each consolidation's undo, every forgotten turn back).
    chat = tmp_path / "chat.json"
    said = ["The staging password is hunter2-orange-kettle.", "The deploy key is in the vault."]
    chat.write_text(json.dumps([{"speaker": "A", "text": text} for text in said]))
    assert octobrain(env, "ingest", str(chat)).returncode == 0
    turns = {
        m["content"]: m["id"]
        for m in json.loads(octobrain(env, "recent", "--format", "json").stdout)
    }
    for turn in turns.values():
        assert octobrain(env, "forget", turn, "--yes").returncode == 0
    _flip_in_journal(env, turns[said[0]], "forgotten_turns")
    kept_parent, _ = _merged(env)
    parent, ids = _merged(env, TWINS[2:4])
    journal = lancedb.connect(str(store_dir(env))).open_table("consolidations").to_arrow()
    [record] = [r["id"] for r in journal.to_pylist() if r["parent_id"] == parent]
    _flip_in_journal(env, ids[1])
    assert run_cli(env, "doctor")[0] == 1

    rc, _, err = run_cli(env, "doctor", "--forget-damaged")
    assert rc == 0, err
    assert f"consolidations: forgot record {record} (damaged)" in err, err
    assert "forgotten_turns: forgot record" in err and "hunter2" not in err, err
    assert _states(env, ids) == ["consolidated", "consolidated"]  # (can no longer be undone)
    # The rest of each journal is kept: the other merge is undone, the other turn stays out.
    assert octobrain(env, "unconsolidate", kept_parent).returncode == 0
    assert octobrain(env, "ingest", str(chat)).returncode == 0
    shown = octobrain(env, "recent").stdout
    assert "deploy key" not in shown, shown
