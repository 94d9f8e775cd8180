"""A lost or damaged index is found by `octobrain doctor` and rebuilt by `memory reindex`; a
Lance panic is one line naming doctor."""

from __future__ import annotations

import json
import shutil

import lancedb
import pytest

from tests.reliability.damage_support import (
    indexed_store,
    run_cli,
    store_dir,
)
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line


def _cut_id_index(env: dict[str, str]) -> None:
    """The id index's pages cut to half: its lookup table still reads."""
    table = lancedb.connect(store_dir(env)).open_table("memories")
    [uuid] = [ix.index_uuid for ix in table.list_indices() if ix.name == "id_idx"]
    pages = store_dir(env) / "memories.lance" / "_indices" / uuid / "page_data.lance"
    pages.write_bytes(pages.read_bytes()[: pages.stat().st_size // 2])


def _flip_bitmap_lookups(env: dict[str, str]) -> None:
    """64 bytes in the middle of each bitmap index's page lookup inverted (on a larger store
    LanceDB panics reading them: `test_a_lance_panic_is_one_line_naming_doctor`)."""
    for lookup in (store_dir(env) / "memories.lance" / "_indices").glob(
        "*/bitmap_page_lookup.lance"
    ):
        data = bytearray(lookup.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
        lookup.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["indexes lost", "id index pages cut", "bitmaps flipped"])
def test_a_lost_index_is_found_by_doctor_and_rebuilt_by_reindex(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # Reads through the index (a lookup by id, the scope filter) fail while a full scan of
    # every row reads fine: the error sends the user to doctor, which must find it. Cut
    # pages of the id index went unnoticed: doctor looked up one value, which reads one page.
    ids = indexed_store(env, monkeypatch)
    if damage == "indexes lost":
        shutil.rmtree(store_dir(env) / "memories.lance" / "_indices")
    elif damage == "bitmaps flipped":
        _flip_bitmap_lookups(env)
    else:
        _cut_id_index(env)
    done = octobrain(env, *(("recent",) if damage == "bitmaps flipped" else ("get", ids[0])))
    assert done.returncode == 1 and "octobrain doctor" in one_clear_line(done.stderr)
    if damage == "indexes lost":  # a memorize looks for a copy of itself through them too
        done = octobrain(env, "memorize", "-t", "After the loss", "-c", "A fact written now.")
        assert done.returncode == 1 and "Memory stored" not in done.stdout
        line = one_clear_line(done.stderr)
        assert "nothing was changed" in line and "octobrain doctor" in line, line
    rc, out, _ = run_cli(env, "doctor", "--format", "json")
    report = json.loads(out)
    counts = {"indexes lost": 4, "id index pages cut": 1, "bitmaps flipped": 2}  # (scope, state)
    assert rc == 1 and len(report["problems"]) == counts[damage], report
    for problem in report["problems"]:
        assert problem["problem"].startswith("index ") and "cannot be read" in problem["problem"]
        assert "`octobrain memory reindex`" in problem["repair"]
    done = octobrain(env, "reindex", scoped=False)
    assert done.returncode == 0 and "dropped 4 indexes" in done.stdout, done.stderr
    assert run_cli(env, "doctor")[0] == 0
    assert octobrain(env, "get", ids[0]).returncode == 0
    memorize(env, "After the repair", "A fact written once the indexes were rebuilt.")


def test_a_lance_panic_or_an_overflowing_footer_is_one_line_naming_doctor() -> None:
    # A bitmap index's lookup flipped on a store of 5,000 memories made LanceDB panic
    # (`pyo3_async_runtimes.RustPanic`, no module exports the class), and a data file's
    # footer flipped gave a ValueError: every command, and doctor, ended in a traceback.
    from octobrain.store.manifest import read_failure

    class RustPanic(Exception):  # (matched by its name, as the real one must be)
        pass

    for failure, said in (
        (RustPanic("rust future panicked: unknown error"), "LanceDB panicked reading it"),
        (ValueError("Invalid input, column metadata range overflows for column index 11"), "range"),
    ):
        line = read_failure(failure)
        assert line is not None and line.startswith("store: a table cannot be read (")
        assert said in line and "octobrain doctor" in line
    assert read_failure(ValueError("Invalid input, something else")) is None
