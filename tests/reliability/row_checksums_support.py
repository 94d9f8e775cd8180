"""What the row checksum tests (and the recent- and knowledge-damage tests) share: a bit flipped
inside a value in a table's data files, and a folder of notes indexed as knowledge."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.damage_support import store_dir
from tests.reliability.test_storage_faults import octobrain


def _flip(env: dict[str, str], found: bytes, bit: int) -> int:
    """Flip one bit of `found` (byte `bit // 8`, bit `bit % 8`) in every memories data file
    holding it; how many files changed."""
    changed = 0
    for path in (store_dir(env) / "memories.lance" / "data").glob("*.lance"):
        raw = bytearray(path.read_bytes())
        at = raw.find(found)
        if at < 0:
            continue
        raw[at + bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(raw))
        changed += 1
    return changed


def _indexed(env: dict[str, str], tmp_path: Path, name: str, number: int) -> Path:
    doc = tmp_path / f"{name}.md"
    doc.write_text(f"# Ports\n\nThe {name} service listens on port {number}.\n")
    assert octobrain(env, "index", str(doc), group="knowledge").returncode == 0
    return doc


def _flip_chunks(env: dict[str, str], found: bytes, table: str = "knowledge_chunks") -> int:
    """Turn the last byte of `found` ("0" into "1") wherever it is in the data files of the
    knowledge chunks (or `table`); how many places changed."""
    changed = 0
    for path in (store_dir(env) / f"{table}.lance" / "data").glob("*.lance"):
        raw = bytearray(path.read_bytes())
        at = raw.find(found)
        while at >= 0:
            raw[at + len(found) - 1] ^= 1
            changed += 1
            at = raw.find(found, at + 1)
        path.write_bytes(bytes(raw))
    return changed
