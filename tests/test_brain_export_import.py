"""Export and import of memories: a lossless round trip, and an import file that is cut short,
too long, odd or wrong refused whole, by its line."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput, StorageError
from octobrain.memory import import_check
from octobrain.memory.brain import Brain
from octobrain.memory.export import BATCH, export_jsonl
from octobrain.memory.transfer import import_jsonl, reembed
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared
from tests.export_lines import ended


def test_export_import_round_trip_is_lossless(make_brain: MakeBrain, tmp_path: Path) -> None:
    brain = make_brain()
    a, _ = brain.memorize(
        *TOKEN_BUCKET, tags=["api"], related_files=["gw/limit.py"], importance=0.7
    )
    brain.memorize(
        *POSTGRES, global_=True, source="user_confirmed", related_to=[{"target_id": a.id}]
    )
    brain.remember("token bucket")  # an access, so the counts differ from defaults
    out = io.StringIO()
    assert export_jsonl(brain, out, embeddings=True).count == 2
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    report = import_jsonl(other, out.getvalue().splitlines())
    assert (report.imported, report.relationships, report.reembedded) == (2, 1, 0)
    for mem in (
        brain.get(a.id),
        *[h.memory for h in brain.remember("postgres", min_relevance=0.0).hits],
    ):
        assert other.get(mem.id) == mem
    again = import_jsonl(other, out.getvalue().splitlines())
    assert (again.imported, again.skipped_existing, again.relationships) == (0, 2, 0)
    with pytest.raises(InvalidInput, match=r"^line 2\.title: must be 5–200 bytes"):
        bad = json.dumps({"kind": "memory", "id": a.id, "scope": "", "title": "x"})
        import_jsonl(other, [out.getvalue().splitlines()[0], bad])
    # A time UTC has no day for would be stored, then break every read that shows it.
    header, row = (json.loads(line) for line in out.getvalue().splitlines()[:2])
    row.update(created_at="9999-12-31T23:30:00-05:00")
    with pytest.raises(InvalidInput, match=r"^line 2\.created_at: must fall within years 1–9999"):
        import_jsonl(other, [json.dumps(header), json.dumps(row)])


def test_export_writes_a_damaged_vector_as_none_and_says_so(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # Bytes garbled on disk read back as `inf` / `nan`: the export wrote them bare, which is no
    # JSON, said it succeeded, and the backup could not be imported ("line 60: is not JSON").
    import pyarrow as pa

    brain = make_brain()
    hurt, _ = brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES)
    row = brain.store.scan(f"id = '{hurt.id}'")[0]
    row["embedding"] = [float("inf")] * brain.embedder.dim
    table = pa.Table.from_pylist([row], schema=brain.store.memories.schema)
    brain.store.memories.merge_insert("id").when_matched_update_all().execute(table)
    out = io.StringIO()
    done = export_jsonl(make_brain(), out, embeddings=True)
    assert (done.count, done.vectors_left_out) == (2, [hurt.id])
    assert done.warning().startswith("warning: 1 memory's stored vector is damaged")
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert ["embedding" in r for r in rows[1:3]] == [r["id"] != hurt.id for r in rows[1:3]]
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    assert import_jsonl(other, out.getvalue().splitlines()).imported == 2
    assert other.remember("token bucket").hits[0].memory.id == hurt.id


def test_an_import_of_a_backup_cut_short_is_refused_whole(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A backup cut after 999 of its 3,005 memories imported "999 memories", exit 0; one cut
    # in its edges or journal lost them without a word.
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    out = io.StringIO()
    export_jsonl(brain, out)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [
        "header", "memory", "memory", "relationship", "end"
    ]  # fmt: skip
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    cut = "it was cut short or edited; nothing was imported"
    for part in (lines[:2], lines[:3], lines[:4]):
        with pytest.raises(InvalidInput, match=rf"^file: ends without its end line: {cut}"):
            import_jsonl(other, part)
    no_edge = [*lines[:3], lines[4]]
    with pytest.raises(InvalidInput, match="^file: holds 0 relationship lines where it counts 1"):
        import_jsonl(other, no_edge)
    with pytest.raises(InvalidInput, match="^line 6: follows the file's end line"):
        import_jsonl(other, [*lines, lines[1]])
    odd_end = json.dumps({**json.loads(lines[4]), "memory": "2"})
    with pytest.raises(InvalidInput, match=r"^line 5\.memory: must be a whole number >= 0"):
        import_jsonl(other, [*lines[:4], odd_end])
    # A version 1 file (before the end line) is read, its memories checked by the header's count.
    old = json.dumps({**json.loads(lines[0]), "version": 1})
    with pytest.raises(InvalidInput, match="^file: holds 1 memory line where it counts 2"):
        import_jsonl(other, [old, lines[1]])
    assert other.store.count() == 0
    assert import_jsonl(other, [old, *lines[1:4]]).imported == 2


def _one_row_export(brain: Brain) -> tuple[dict[str, Any], dict[str, Any]]:
    brain.memorize(*TOKEN_BUCKET, tags=["api"])
    out = io.StringIO()
    export_jsonl(brain, out, embeddings=True)
    header, row = (json.loads(line) for line in out.getvalue().splitlines()[:2])
    return header, row


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"embedding": [1e300] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [0.0] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": ["a"] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [True] * 64}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": 7}, r"^line 2\.embedding: must be a list of finite numbers"),
        ({"embedding": [0.5] * 5}, r"^line 2\.embedding: must hold the header's dim, 64 numbers"),
        ({"access_count": 2**63}, r"^line 2\.access_count: must be an integer in \[0, "),
        ({"tags": 5}, r"^line 2\.tags: must be a list of strings, got integer"),
        ({"related_files": {"a": 1}}, r"^line 2\.related_files: must be a list of strings"),
        ({"role": {"x": 1}}, r"^line 2\.role: must be a string"),
        ({"role": "r" * 300}, r"^line 2\.role: must be 0–256 bytes"),
        ({"git_commit": "ab\x00c"}, r"^line 2\.git_commit: must not contain NUL"),
        ({"context": "ok\x00"}, r"^line 2\.context: must not contain NUL"),
        ({"context": "token ghp_" + "a1B2" * 9}, r"^line 2\.context: .*secret"),
        # Stored, a row dated 9999 headed `memory recent` until then; ingest refuses such times.
        (
            {"created_at": "9999-01-01T00:00:00+00:00"},
            r"^line 2\.created_at: must not be more than a day ahead of now, got 9999-01-01",
        ),
        (
            {"last_accessed": "9999-01-01T00:00:00Z"},
            r"^line 2\.last_accessed: must not be more than a day ahead of now",
        ),
        (
            {"updated_at": "2999-06-01T00:00:00Z"},
            r"^line 2\.updated_at: must not be more than a day ahead of now",
        ),
    ],
)
def test_an_import_row_is_refused_for_what_it_holds_and_nothing_is_written(
    make_brain: MakeBrain, tmp_path: Path, change: dict[str, Any], rule: str
) -> None:
    # Each of these was stored, or failed half-way with a traceback: an overflowing vector then
    # broke every search of its scope, an access count past int64 failed after 256 rows.
    header, row = _one_row_export(make_brain())
    other = Brain("import/target", config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    with pytest.raises(InvalidInput, match=rule):
        import_jsonl(other, [json.dumps(header), json.dumps({**row, **change})])
    assert other.store.count() == 0


def test_an_import_of_many_batches_is_checked_whole_before_any_is_written(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # The memories wait in a spool file between the check and the write, batch by batch.
    header, row = _one_row_export(make_brain())
    rows = [
        {**row, "id": str(uuid.UUID(int=i + 1)), "title": f"Imported note {i}"}
        for i in range(2 * BATCH + 5)
    ]
    body = [json.dumps(header), *map(json.dumps, rows)]
    lines = ended(body)
    other = Brain(header["scope"], config=Config(), embedder=make_brain().embedder,
                  uri=tmp_path / "other")  # fmt: skip
    bad = json.dumps({**rows[0], "id": str(uuid.UUID(int=10**6)), "importance": 2})
    with pytest.raises(InvalidInput, match=rf"^line {len(body) + 1}\.importance"):
        import_jsonl(other, ended([*body, bad]))
    assert other.store.count() == 0
    report = import_jsonl(other, ended(body[: BATCH + 1]))  # a first part of the file
    assert (report.imported, report.skipped_existing, report.reembedded) == (BATCH, 0, 0)
    report = import_jsonl(other, lines)  # the whole: the first part is skipped
    assert (report.imported, report.skipped_existing) == (BATCH + 5, BATCH)
    assert other.store.count() == 2 * BATCH + 5
    assert other.get(rows[-1]["id"]).title == f"Imported note {2 * BATCH + 4}"
    # Re-embedding streams the rows through the new version, batch by batch.
    moved = Brain(other.scope, config=Config(), embedder=get_embedder("hash:32"),
                  uri=tmp_path / "other")  # fmt: skip
    assert reembed(moved) == 2 * BATCH + 5
    assert moved.store.count() == 2 * BATCH + 5
    assert moved.get(rows[7]["id"]).title == "Imported note 7"


def test_an_exported_vector_reads_back_to_the_stored_one_bit_for_bit(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    for title, content in (TOKEN_BUCKET, POSTGRES):
        brain.memorize(title, content)
    out = io.StringIO()
    export_jsonl(brain, out, embeddings=True)
    exported = [json.loads(line) for line in out.getvalue().splitlines()[1:3]]
    stored = {
        r["id"]: r["embedding"] for r in brain.store.scan("true", columns=["id", "embedding"])
    }
    for row in exported:
        assert np.array_equal(np.asarray(row["embedding"], dtype=np.float32), stored[row["id"]])
    assert [r["title"] for r in exported] == [TOKEN_BUCKET[0], POSTGRES[0]]  # oldest first
    # Imported, each is stored as it was: not scaled to unit length a second time.
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    import_jsonl(other, out.getvalue().splitlines())
    for row in other.store.scan("true", columns=["id", "embedding"]):
        assert np.array_equal(row["embedding"], stored[row["id"]])


def test_an_import_line_too_long_to_hold_is_refused_by_its_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(import_check, "LINE_BYTES", 64)
    lines = import_check.file_lines(io.BytesIO(b"{}\n" + b"x" * 63 + b"\n" + b"y" * 65 + b"\n"))
    assert next(lines) == b"{}\n" and next(lines) == b"x" * 63 + b"\n"
    with pytest.raises(InvalidInput, match=r"^line 3: must be at most 64 bytes long"):
        next(lines)


@pytest.mark.parametrize("end", [b"\r", b"\r\n"])
def test_an_import_file_with_other_line_ends_imports_and_names_lines(
    make_brain: MakeBrain, tmp_path: Path, end: bytes
) -> None:
    # An export saved with lone CRs (old Mac) was one line: "line 1: is not JSON".
    brain = make_brain()
    header, row = _one_row_export(brain)
    data = end.join(line.encode() for line in ended([json.dumps(header), json.dumps(row)])) + end
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    with pytest.raises(InvalidInput, match=r"^line 4: is not JSON"):
        oops = data + b"{oops" + end  # after the end line, which it is not
        import_jsonl(other, import_check.file_lines(io.BytesIO(oops)))
    assert import_jsonl(other, import_check.file_lines(io.BytesIO(data))).imported == 1


def test_an_import_file_that_is_not_plain_json_lines_is_named_by_line(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    header, row = _one_row_export(brain)
    other = Brain(brain.scope, config=Config(), embedder=brain.embedder, uri=tmp_path / "other")
    first = json.dumps(header).encode()
    cases = {
        b'{"kind": "memory", "title": "caf\xe9"}': r"^line 2: is not UTF-8 text",
        b"[" * 100_000 + b"]" * 100_000: r"^line 2: is nested too deeply",
        b'{"kind": "memory", "access_count": ' + b"9" * 5000 + b"}": r"^line 2: holds a number",
    }
    for bad, rule in cases.items():
        with pytest.raises(InvalidInput, match=rule):
            import_jsonl(other, [first, bad])
    # One id twice in a file was stored as two rows of one id (and edited as one).
    twice = ended([json.dumps(header), json.dumps(row), json.dumps({**row, "title": "Other"})])
    with pytest.raises(InvalidInput, match=r"^line 3\.id: repeats the memory id of line 2"):
        import_jsonl(other, twice)
    assert other.store.count() == 0
    # A stored vector of another length than one is kept at unit length.
    longer = {**row, "embedding": [3.0 * x for x in row["embedding"]]}
    assert import_jsonl(other, ended([json.dumps(header), json.dumps(longer)])).reembedded == 0
    assert other.remember(TOKEN_BUCKET[0], min_relevance=0.0).hits[0].cosine == pytest.approx(
        brain.remember(TOKEN_BUCKET[0], min_relevance=0.0).hits[0].cosine, abs=1e-5
    )


def test_an_import_whose_temporary_file_cannot_be_written_says_so_in_one_line(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    header, row = _one_row_export(brain)
    with open("/dev/full", "wb", buffering=0) as full, pytest.raises(StorageError) as caught:
        import_check.check_import(brain, ended([json.dumps(header), json.dumps(row)]), full)
    assert "cannot write its temporary file" in str(caught.value)
    assert "No space left on device" in str(caught.value) and "\n" not in str(caught.value)
