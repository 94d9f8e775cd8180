"""`IdIndex`: the rows holding any of a few ids, the same as a scan of the columns finds."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from octobrain import _core
from octobrain.kernels.idindex import IdIndex, string_layout


def _scan(table: pa.Table, columns: list[str], ids: list[str]) -> pa.Table:
    wanted = pa.array(ids, pa.string())
    hit = pc.is_in(table.column(columns[0]), value_set=wanted)
    for column in columns[1:]:
        hit = pc.or_(hit, pc.is_in(table.column(column), value_set=wanted))
    return table.filter(hit)


def test_lookups_find_what_a_scan_finds() -> None:
    rng = random.Random(7)
    names = [f"id-{i}" for i in range(300)] + ["", "ünï-çødé", "a\x00b"]
    rows = 3000
    table = pa.table(
        {
            "source_id": [rng.choice(names) for _ in range(rows)],
            "target_id": pa.array([rng.choice(names) for _ in range(rows)], pa.large_string()),
            "n": list(range(rows)),
        }
    )
    # In several chunks, and a slice that starts mid-chunk: offsets must be read where they are.
    table = pa.concat_tables([table.slice(0, 1000), table.slice(1000)]).slice(17)
    index = IdIndex(table, ["source_id", "target_id"])
    for _ in range(50):
        ids = [*rng.sample(names, rng.randint(0, 6)), "never-stored"]
        assert index.touching(ids).equals(_scan(table, ["source_id", "target_id"], ids))


def test_a_null_reads_as_empty_and_other_types_are_refused() -> None:
    offsets, data = string_layout(pa.array(["ab", None, "c"]))
    assert offsets.tolist() == [0, 2, 2, 3] and bytes(data[:3]) == b"abc"
    with pytest.raises(TypeError, match="values: must be strings"):
        string_layout(pa.array([1, 2]))


def test_bad_layouts_name_the_argument() -> None:
    good = (np.array([0, 1], np.int64), np.frombuffer(b"a", np.uint8))
    with pytest.raises(ValueError, match="^columns: offsets must end within the data"):
        _core.IdIndex.build([(np.array([0, 5], np.int64), good[1])])
    with pytest.raises(ValueError, match="^columns: must all hold one string per row"):
        _core.IdIndex.build([good, (np.array([0, 1, 1], np.int64), good[1])])
    index = _core.IdIndex.build([good])
    with pytest.raises(ValueError, match="^wanted: offsets must be non-negative"):
        index.rows_of(np.array([1, 0], np.int64), good[1])
    assert index.row_count == 1 and index.rows_of(*good).tolist() == [0]
