"""What the tests of the `Knowledge` facade share: a guide of three sections written as a file,
and a count of the reads of a file."""

from __future__ import annotations

from pathlib import Path

import pytest

GUIDE = """# Service guide

The billing service issues invoices and tracks payments for every tenant.

## Deployment

Deploys go through the blue-green pipeline. Each release is canaried for ten minutes.

## Rate limits

API rate limiting uses a token bucket per key: 100 requests per minute, burst 20.
"""


def write_guide(tmp_path: Path, text: str = GUIDE) -> Path:
    path = tmp_path / "guide.md"
    path.write_text(text)
    return path


def count_file_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs of the local files the knowledge service reads from now on, one per read; a
    file just written is kept as one that settled long ago (`ByFile.SETTLED_NS`)."""
    import octobrain.knowledge.service as service
    from octobrain.knowledge.by_file import ByFile
    from octobrain.knowledge.sources import Fetched, SourceRef

    monkeypatch.setattr(ByFile, "SETTLED_NS", 0)

    reads: list[str] = []
    real = service.read_file

    def counted(ref: SourceRef, max_bytes: int) -> Fetched:
        reads.append(ref.uri)
        return real(ref, max_bytes)

    monkeypatch.setattr(service, "read_file", counted)
    return reads
