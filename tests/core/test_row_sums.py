"""`row_sums`: the checksums of a whole table at once, in Rust, equal `schema._crc` (the
readable reference) of every row, as the store lays the columns out and as a read hands them
over (chunked, sliced, large strings, floats as float64)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.memory.snapshot_reads import garbled
from octobrain.store import row_sums
from octobrain.store.journal_rows import RECORD_FIELDS, records_damaged
from octobrain.store.schema import (
    CHECKED_LISTS,
    CHECKED_TEXT,
    CHECKSUM,
    CHUNK_FIELDS,
    SOURCE_FIELDS,
    _crc,
    checksum,
    chunk_checksum,
    chunk_verified,
    memories_schema,
    source_checksum,
    source_verified,
)

_TS = pa.timestamp("us", tz="UTC")
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_maybe_text = st.none() | _text
_times = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
_floats = st.floats(allow_nan=False, allow_infinity=False, width=32)
_lists = st.none() | st.lists(_maybe_text, max_size=4)


@st.composite
def _memory(draw: st.DrawFn) -> dict[str, Any]:
    row: dict[str, Any] = {name: draw(_maybe_text) for name in CHECKED_TEXT}
    row |= {name: draw(_lists) for name in CHECKED_LISTS}
    row |= {"importance": draw(_floats), "pre_consolidation_importance": draw(st.none() | _floats)}
    return row | {"created_at": draw(_times), "updated_at": draw(_times)}


def _table(rows: list[dict[str, Any]], large: bool) -> pa.Table:
    kinds = {f.name: f.type for f in memories_schema("m", 4) if f.name in rows[0]}
    kinds |= {"context": pa.string(), "importance": pa.float64()}
    if large:  # (large strings, as some readers hand them over)
        kinds |= {name: pa.large_string() for name in CHECKED_TEXT}
    table = pa.table({name: pa.array([r[name] for r in rows], kinds[name]) for name in kinds})
    # In two chunks, then a slice starting mid-chunk: every buffer read from its offset.
    return pa.concat_tables([table.slice(0, 2), table.slice(2)]).slice(1)


@settings(max_examples=60, deadline=None)
@given(st.lists(_memory(), min_size=2, max_size=12), st.booleans())
def test_every_row_sums_as_the_reference_does(rows: list[dict[str, Any]], large: bool) -> None:
    table = _table(rows, large)
    assert row_sums.crcs(table).tolist() == [_crc(row) for row in rows[1:]]


@settings(max_examples=40, deadline=None)
@given(st.lists(_memory(), min_size=2, max_size=8), st.data())
def test_garbled_finds_exactly_the_rows_that_no_longer_match(
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    sums: list[int | None] = []
    for row in rows:  # matching, changed since, unstamped, or stamped for another time
        kind = data.draw(st.sampled_from(["ok", "changed", "none", "restamped"]))
        stored = checksum(row)
        sums.append(
            {"ok": stored, "changed": stored ^ 1, "none": None, "restamped": stored ^ 1 << 40}[kind]
        )
    table = _table(rows, False).append_column(CHECKSUM, pa.array(sums[1:], pa.int64()))
    want = {i for i, s in enumerate(sums[1:]) if s is not None and s == checksum(rows[i + 1]) ^ 1}
    assert garbled(table) == want


_RECORD_TYPES = {
    "member_prev_importance": pa.list_(pa.float32()),
    "member_prev_pre": pa.list_(pa.float32()),
    "member_prev_updated_at": pa.list_(_TS),
    "parent_synthesised": pa.bool_(),
    "parent_prev_importance": pa.float32(),
}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_records_lists_of_floats_and_times_and_flags_sum_as_the_reference_does(
    data: st.DataObject,
) -> None:
    text, lists, _, times = RECORD_FIELDS
    kinds: dict[str, pa.DataType] = {name: pa.list_(pa.string()) for name in lists}
    kinds |= {name: pa.string() for name in text} | {name: _TS for name in times}
    kinds |= _RECORD_TYPES
    values = {name: _lists for name in lists} | {name: _maybe_text for name in text}
    values |= {name: st.none() | _times for name in times} | {
        "member_prev_importance": st.lists(st.none() | _floats, max_size=3),
        "member_prev_pre": st.lists(st.none() | _floats, max_size=3),
        "member_prev_updated_at": st.lists(st.none() | _times, max_size=3),
        "parent_synthesised": st.booleans(),
        "parent_prev_importance": st.none() | _floats,
    }
    rows = [
        {name: data.draw(values[name]) for name in kinds}
        for _ in range(data.draw(st.integers(1, 6)))
    ]
    table = pa.table({name: pa.array([r[name] for r in rows], kinds[name]) for name in kinds})
    assert row_sums.crcs(table, RECORD_FIELDS).tolist() == [
        _crc(row, RECORD_FIELDS) for row in rows
    ]


def test_a_record_with_a_status_there_is_not_is_damaged() -> None:
    at = datetime(1969, 12, 31, tzinfo=UTC) + timedelta(microseconds=7)
    row = {name: "x" for name in RECORD_FIELDS[0]} | {
        "member_ids": ["a"], "member_prev_importance": [0.5], "member_prev_pre": [None],
        "member_prev_state": ["working"], "member_prev_updated_at": [at], "edge_ids": [],
        "parent_synthesised": True, "parent_prev_importance": None,
        "parent_prev_updated_at": None, "stamp": at, "created_at": at,
    }  # fmt: skip
    rows = [row | {"status": status} for status in ("done", "gone", "done")]
    sums = [checksum(row, RECORD_FIELDS, "created_at")] * 2 + [None]
    table = pa.Table.from_pylist([r | {CHECKSUM: s} for r, s in zip(rows, sums, strict=True)])
    assert np.flatnonzero(records_damaged(table)).tolist() == [1]


def test_knowledge_rows_are_damaged_as_their_readable_checks_say() -> None:
    at = datetime(2026, 1, 2, tzinfo=UTC)
    source = {name: f"{name} value" for name in SOURCE_FIELDS[0]} | {"indexed_at": at}
    chunk = {name: f"{name} value" for name in CHUNK_FIELDS[0]}
    chunk |= {"section_path": ["Intro", None], "indexed_at": at}
    # Sound, changed since, unstamped, and (a source only) stamped for another time.
    sources = [source | {CHECKSUM: source_checksum(source)} for _ in range(4)]
    sources[1]["title"] = "changed"
    sources[2][CHECKSUM] = None
    sources[3][CHECKSUM] ^= 1 << 40
    chunks = [chunk | {CHECKSUM: chunk_checksum(chunk)} for _ in range(3)]
    chunks[1]["content"] = "changed"
    chunks[2][CHECKSUM] = None
    for rows, check, verified in (
        (sources, row_sums.sources_damaged, source_verified),
        (chunks, row_sums.chunks_damaged, chunk_verified),
    ):
        table = pa.Table.from_pylist(rows)
        assert check(table).tolist() == [verified(row) is False for row in rows]
        batches = pa.concat_tables([table.slice(0, 2), table.slice(2)]).to_batches()
        assert row_sums.damaged_ids(batches, check) == [rows[1]["id"]]
