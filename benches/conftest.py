"""Shared benchmark fixtures: the SciFact BEIR dataset, loaded once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from octobrain.bench.datasets import BeirDataset, load_beir

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    """SciFact directory from $OCTOBRAIN_SCIFACT, default ../shared/data/scifact."""
    path = Path(os.environ.get("OCTOBRAIN_SCIFACT", REPO / ".." / "shared" / "data" / "scifact"))
    if not (path / "qrels" / "test.tsv").exists():
        pytest.skip(f"SciFact not found at {path}: set OCTOBRAIN_SCIFACT to a BEIR scifact dir")
    return path


@pytest.fixture(scope="session")
def scifact(scifact_dir: Path) -> BeirDataset:
    """The SciFact test split (5,183 documents, 300 queries)."""
    return load_beir(scifact_dir)
