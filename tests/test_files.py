"""Reading a local file whole, within a bound (`octobrain.files.read_regular`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from octobrain.files import NotARegularFile, TooLarge, read_regular
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
