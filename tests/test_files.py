"""Reading a local file whole, within a bound (`octobrain.files.read_regular`)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from octobrain.files import NotARegularFile, TooLarge, gunzipped, read_regular
from tests.traced import traced


def test_a_record_of_a_few_bytes_under_a_large_bound_sets_no_bound_aside(tmp_path: Path) -> None:
    # Reading `bound + 1` bytes set that much memory aside first: every record under
    # `_octobrain/` (read with a 64 MiB bound) cost a 64 MiB allocation.
    record = tmp_path / "record.json"
    record.write_text('{"format": 1}')
    found = traced(
        f"""
        from octobrain.files import read_regular

        def prepare():
            return [{str(record)!r}]

        def work(path):
            data, status = read_regular(path, 64 << 20)
            return [data.decode(), status.st_size]
        """
    )
    assert found["result"] == ['{"format": 1}', len('{"format": 1}')]
    assert found["peak"] < 1 << 20, found


def test_a_file_whose_status_says_less_is_read_to_its_end_within_the_bound(tmp_path: Path) -> None:
    proc = Path("/proc/self/status")  # a regular file that says it holds 0 bytes
    if not proc.exists():
        pytest.skip("no /proc")
    data, status = read_regular(proc, 1 << 20)
    assert status.st_size == 0 and b"Name:" in data and len(data) > 100
    with pytest.raises(TooLarge):
        read_regular(proc, 10)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 100)
    with pytest.raises(TooLarge):
        read_regular(big, 99)
    assert read_regular(big, 100)[0] == b"x" * 100


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile):
        read_regular(fifo, 1 << 20)


def test_a_gzip_file_of_many_members_is_inflated_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each member's leftover (the whole rest of the file) was handed on as a copy: 8 MB of
    # empty members (`memory ingest x.json.gz`) took 4 minutes, 64 MiB hours.
    fed: list[int] = []
    make = zlib.decompressobj

    class Counted:
        def __init__(self, wbits: int) -> None:
            self._inflater = make(wbits)

        def decompress(self, data: memoryview, max_length: int) -> bytes:
            fed.append(len(data))
            return self._inflater.decompress(data, max_length)

        def __getattr__(self, name: str) -> object:
            return getattr(self._inflater, name)

    monkeypatch.setattr(zlib, "decompressobj", Counted)
    data = gzip.compress(b"") * 20_000 + gzip.compress(b"[1]") + gzip.compress(b"\n") + b"\0" * 9
    assert gunzipped("file", data, 1 << 20) == b"[1]\n"
    assert sum(fed) < 4 * len(data)  # (before: 4 GB handed in for this 400 kB)
