"""Bulk commands killed part-way. A `memory import`: what it wrote stays, `doctor` names the
import cut short, and running the same import again finishes it (consolidation records
included) without duplicates. A `memory migrate`: the copy refuses to open, and running the
migrate again starts it over. Any command killed while it replaces one of its small records:
the file it was writing is removed by the next write of that record."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.memory.export import export_jsonl
from octobrain.memory.transfer import import_jsonl
from octobrain.models import State
from tests.reliability.damage_support import run_cli

SCOPE = "github.com/acme/api"

# `octobrain ARGS…`, killed by SIGKILL at the first call of MODULE:ATTRIBUTE whose arguments'
# text holds WORD: `python -c CHILD MODULE:ATTRIBUTE WORD ARGS…`.
CHILD = textwrap.dedent(
    """
    import importlib, os, signal, sys
    from octobrain.cli.launch import main

    where, word, *args = sys.argv[1:]
    module, name = where.split(":")
    owner = importlib.import_module(module)
    *path, name = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    real = getattr(owner, name)

    def killed(*a, **k):
        if word in repr((a, k)):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)

    setattr(owner, name, killed)
    main(args)
    """
)


def killed_at(env: dict[str, str], where: str, word: str, *args: str) -> None:
    """Run `octobrain ARGS` killed at the first call of `where` holding `word` (`CHILD`)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, where, word, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def brain_at(store: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=store)


@pytest.fixture
def closed_goal(tmp_path: Path) -> tuple[Path, str, str]:
    """An export of a goal closed by a note (a consolidation: the finding under the closing
    note); returns it, the closing note's id and the finding's."""
    brain = brain_at(tmp_path / "source")
    goal, _ = brain.memorize("Goal: faster API", "Bring p95 under 200 ms.", memory_type="goal")
    achieves = [{"target_id": goal.id, "relationship_type": "achieves"}]
    finding, _ = brain.memorize("Token bucket", "Rate limits shed abuse.", related_to=achieves)
    closes = [{"target_id": goal.id, "relationship_type": "closes"}]
    closing, _ = brain.memorize("Goal reached", "p95 is 170 ms now.", related_to=closes)
    assert brain.get(finding.id).state is State.CONSOLIDATED
    out = io.StringIO()
    export_jsonl(brain, out)
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue())
    return path, closing.id, finding.id


def import_killed(env: dict[str, str], export: Path) -> tuple[str, ...]:
    """Import `export`, killed after its memories and edges committed and before its
    consolidation records; returns the import's arguments."""
    import_args = ("memory", "--scope", SCOPE, "import", str(export))
    killed_at(env, "octobrain.store.consolidations:ConsolidationLog.add", "", *import_args)
    return import_args


def test_an_import_killed_before_its_records_is_named_and_finished_by_running_it_again(
    env: dict[str, str], closed_goal: tuple[Path, str, str]
) -> None:
    # The run again took the memories the killed run had written for the store's own and
    # stored no record naming them: the finding stayed consolidated for good, `unconsolidate`
    # answered "no consolidation in force has parent …", and `doctor` said ok.
    export, closing, finding = closed_goal
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    import_args = import_killed(env, export)
    assert brain_at(store).get(finding).state is State.CONSOLIDATED  # its memories landed

    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    (problem,) = json.loads(out)["problems"]
    assert rc == 1 and f"a `memory import` of {export} (3 memories)" in problem["problem"]
    assert f"run `octobrain memory import {export}` again" in problem["repair"], problem

    rc, out, err = run_cli(env, *import_args, "--format", "json")
    assert rc == 0, err
    report = json.loads(out)
    assert (report["imported"], report["consolidations"]) == (0, 1), report
    assert report["consolidations_not_brought"] == 0, report
    brain = brain_at(store)
    assert brain.store.count() == 3  # nothing twice
    assert brain.unconsolidate(closing).restored == [finding]
    assert brain.get(finding).state is State.WORKING
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 0 and "ok: nothing is wrong" in out, out


def test_a_record_write_killed_before_its_move_leaves_nothing_once_written_again(
    env: dict[str, str],
) -> None:
    # `.manifest.json.<pid>.tmp` (and the lock holders', the sleep records') stayed for good.
    data = Path(env["OCTOBRAIN_DATA_DIR"])
    brain = brain_at(data / "db")
    brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    version = brain.history(1)[0].version
    brain.memorize("Key storage", "Signing keys live in the vault.")
    # (just before the restore's mark, beside the store's manifest, is moved in place)
    killed_at(env, "os:replace", "manifest.json'", "memory", "restore", str(version), "--yes")
    (left,) = data.rglob("*.tmp")
    assert re.fullmatch(r"\.manifest\.json\.\d+\.tmp", left.name), left

    rc, _, err = run_cli(env, "memory", "restore", str(version), "--yes")
    assert rc == 0, err
    assert list(data.rglob("*.tmp")) == []
    assert [m.title for m in brain_at(data / "db").recent(10)] == ["Auth uses JWT"]


def test_a_migrate_killed_part_way_is_finished_by_running_it_again(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The copy refused to open, as it should, and so did the migrate run again ("must be an
    # empty location"): only deleting the copy by hand went on.
    data = Path(env["OCTOBRAIN_DATA_DIR"])
    brain = brain_at(data / "db")
    first, _ = brain.memorize("Auth uses JWT", "The API signs 15 minute JWT access tokens.")
    link = [{"target_id": first.id, "relationship_type": "related_to"}]
    brain.memorize("Key storage", "Signing keys live in the vault.", related_to=link)
    copy = tmp_path / "copy"
    migrate = ("memory", "migrate", "--to", str(copy))
    killed_at(env, "lancedb.table:LanceTable.add", "", *migrate)  # (its first table's rows)
    at_copy = {**env, "OCTOBRAIN_STORAGE_URI": str(copy)}
    rc, _, err = run_cli(at_copy, "memory", "--scope", SCOPE, "stats")
    assert rc == 1 and "was cut short" in err and "run that migrate again" in err, err

    # (what a store deleted there left: the checksums of its memories' deletion files)
    stale = copy / "_octobrain" / "deletions" / "memories.json"
    stale.parent.mkdir()
    stale.write_text('{"format": 1, "version": 9, "files": {}, "sum": ""}')
    rc, _, err = run_cli(env, *migrate)
    assert rc == 0, err
    assert not stale.exists()  # was: kept beside the copied table
    rc, out, _ = run_cli(at_copy, "doctor")
    assert rc == 0 and "ok: nothing is wrong" in out, out
    copied = brain_at(copy)
    assert copied.store.count() == 2 and len(copied.store.relationships_of([first.id])) == 1


def test_two_imports_of_one_file_at_once_store_its_records_when_the_second_is_killed(
    closed_goal: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first run counted as its own only the rows it wrote: a second run of the same file,
    # started beside it and killed before its records, had written the closing note and the
    # finding, so neither run stored the record. The first lifted the import's mark: `doctor`
    # said ok, the finding stayed consolidated for good, and running the import again (a new
    # mark) stored nothing either.
    from octobrain.memory import import_check
    from octobrain.store.consolidations import ConsolidationLog
    from octobrain.store.doctor import diagnose
    from octobrain.store.location import StoreLocation

    export, closing, finding = closed_goal
    store = tmp_path / "db"
    lines = export.read_text().splitlines()
    monkeypatch.setattr(import_check, "BATCH", 1)  # (a batch, a commit, per memory)
    second: list[str] = []

    def beside(_n: int) -> None:  # after the first run's first memory
        if second:
            return
        second.append("started")
        with monkeypatch.context() as killed:
            killed.setattr(ConsolidationLog, "add", _killed)
            with pytest.raises(KeyboardInterrupt):
                import_jsonl(brain_at(store), lines)

    report = import_jsonl(brain_at(store), lines, progress=beside)
    assert (report.imported, report.consolidations) == (1, 1), report
    assert brain_at(store).unconsolidate(closing).restored == [finding]
    assert diagnose(StoreLocation(store)).problems == []


def _killed(*_args: object) -> None:
    raise KeyboardInterrupt  # (as a kill: nothing after it runs)


def test_an_import_record_damaged_is_named_and_cleared_by_a_doctor_option(
    env: dict[str, str], closed_goal: tuple[Path, str, str]
) -> None:
    # Read as empty without a word: `doctor` said ok, and the killed import run again stored
    # its consolidation record for none of the memories its first run wrote (the finding
    # stayed consolidated for good); the damaged record was written over.
    export, _, finding = closed_goal
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    import_args = import_killed(env, export)
    record = store / "_octobrain" / "imports.json"
    record.write_bytes(record.read_bytes()[:-9])  # (cut short)

    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    (problem,) = json.loads(out)["problems"]
    assert rc == 1 and problem["table"] == "_octobrain/imports.json", problem
    assert "is not JSON" in problem["problem"], problem
    assert "`octobrain doctor --abandon-imports`" in problem["repair"], problem
    rc, _, err = run_cli(env, *import_args)
    assert rc == 1 and "_octobrain/imports.json is not JSON" in err, err
    assert "octobrain doctor --abandon-imports" in err and "nothing was imported" in err, err

    rc, out, err = run_cli(env, "doctor", "--abandon-imports")
    assert rc == 0 and "ok: nothing is wrong" in out, out
    assert "imports: cleared the damaged record of imports under way" in err, err
    assert brain_at(store).get(finding).state is State.CONSOLIDATED  # (what it wrote stays)
    rc, _, err = run_cli(env, *import_args)
    assert rc == 0, err


def test_an_import_cut_short_whose_file_is_gone_is_abandoned_by_a_doctor_option(
    env: dict[str, str], closed_goal: tuple[Path, str, str]
) -> None:
    # The only way out `doctor` named was to delete `_octobrain/imports.json` by hand (every
    # other import cut short went with it).
    export, _, _ = closed_goal
    import_killed(env, export)
    export.unlink()
    rc, out, _ = run_cli(env, "doctor")
    assert rc == 1 and "`octobrain doctor --abandon-imports`" in out, out
    assert "delete" not in out, out

    rc, out, err = run_cli(env, "doctor", "--abandon-imports")
    assert rc == 0 and "ok: nothing is wrong" in out, out
    assert f"imports: abandoned the `memory import` of {export} (3 memories)" in err, err


@pytest.mark.parametrize(
    ("record", "option"),
    [("imports.json", "--abandon-imports"), ("manifest.json", "--rewrite-manifest")],
)
def test_a_doctor_repair_of_a_record_a_folder_stands_in_says_to_move_it_aside(
    env: dict[str, str], record: str, option: str
) -> None:
    # A folder in the record's place cannot be read (damage) nor written over by the repair:
    # one line naming the file and the way out, exit 1, nothing else changed.
    store = Path(env["OCTOBRAIN_DATA_DIR"]) / "db"
    brain_at(store).memorize("Cache", "The cache uses setting zq.")
    folder = store / "_octobrain" / record
    folder.unlink(missing_ok=True)
    (folder / "kept").mkdir(parents=True)
    rc, _, err = run_cli(env, "doctor", option)
    assert rc == 1, err
    assert err.startswith(f"error: doctor: cannot replace {folder} ("), err
    assert err.rstrip().endswith("move it aside, then run `octobrain doctor` again"), err
    assert (folder / "kept").is_dir()
