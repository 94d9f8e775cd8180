"""`memory recent` checks the memories it lists (`schema.row_to_memory`), as `get` and
`remember` do: a damaged one is named, never shown; one it does not list does not stop it.
`memory stats` counts a damaged one as damaged and names it, and names damage in the links."""

from __future__ import annotations

import json

import pytest

from octobrain.store.schema import DAMAGED_TITLE
from tests.reliability.damage_support import related_pair
from tests.reliability.row_checksums_support import _flip
from tests.reliability.test_storage_faults import memorize, octobrain, one_clear_line


def test_recent_lists_the_newest_and_names_damage_only_in_what_it_lists(
    env: dict[str, str],
) -> None:
    # Before: every visible row was made into a memory and checked, so one damaged memory
    # anywhere in the scope made `recent -l 2` fail, whichever it listed.
    old, *newer = (
        memorize(env, f"Fact number {i}", f"Durable fact number {i} about the API.")
        for i in (50, 70, 90)
    )
    assert _flip(env, b"Fact number 50", 8 * 13) >= 1  # the title now reads "Fact number 51"

    done = octobrain(env, "recent", "-l", "2", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert [m["id"] for m in json.loads(done.stdout)] == newer[::-1]  # newest first

    done = octobrain(env, "recent", "--format", "json")  # it lists the damaged one too
    assert done.returncode == 1 and "Fact number 51" not in done.stdout
    line = one_clear_line(done.stderr)
    assert old in line and "no longer matches the checksum" in line, line


def test_stats_counts_a_damaged_memory_as_damaged_and_says_so(env: dict[str, str]) -> None:
    # Before: counted by the type, state and scope it read as, exit 0, nothing said, where
    # `get`, `recent` and `remember` name it.
    old, *_ = (
        memorize(env, f"Fact number {i}", f"Durable fact number {i} about the API.")
        for i in (50, 70, 90)
    )
    assert _flip(env, b"Fact number 50", 8 * 13) >= 1
    done = octobrain(env, "stats", "--format", "json")
    assert done.returncode == 1, done.stdout
    line = one_clear_line(done.stderr)
    assert old in line and "no longer matches the checksum" in line, line
    assert "octobrain doctor" in line, line
    counted = json.loads(done.stdout)
    assert counted["total"] == 3 and counted["damaged"] == 1 and counted["damaged_ids"] == [old]
    assert counted["by_state"] == {"working": 2, DAMAGED_TITLE: 1}, counted


@pytest.mark.parametrize("damage", ["flipped", "cut"])
def test_stats_names_damage_in_the_links_too(env: dict[str, str], damage: str) -> None:
    # Before: `stats` read the memories alone: a link flipped on disk, or the links' data file
    # cut, which `remember`, `export` and `doctor` name, and `stats` said nothing, exit 0.
    ids, data = related_pair(env)
    raw = bytearray(data.read_bytes())
    if damage == "cut":
        data.write_bytes(bytes(raw[:100]))
    else:
        raw[raw.index(b"related_to")] ^= 0x02  # "related_to" -> "pelated_to"
        data.write_bytes(bytes(raw))
    done = octobrain(env, "stats", "--format", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    line = one_clear_line(done.stderr)
    assert "relationships" in line and "octobrain doctor" in line, line
    if damage == "flipped":
        assert "table 'relationships' is damaged: link " in line, line
        counted = json.loads(done.stdout)
        assert counted["total"] == len(ids) and counted["damaged_links"] == 1, counted
    else:
        assert "cannot be read" in line, line
