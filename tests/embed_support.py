"""What the embedder tests share: a data dir and fastembed cache of the test's own, the vendored
model's folder and its files' pinned hashes, and the cosine of two unit vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from octobrain.embed import local

VENDORED = Path(local.__file__).parent.parent / "assets" / "all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "fastembed-cache"))


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# ---- the bundled model's files -----------------------------------------------------------------

VENDORED_SHA256 = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "4602e7d8ccaf538303b5b229cba95a100afd06300c1b50ecae71c4fa588ab752",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
