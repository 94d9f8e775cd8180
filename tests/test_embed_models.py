"""Embedders: model strings, the hash embedder, and fastembed's loading rules (lazy, offline,
cached)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from octobrain.embed import factory, local
from octobrain.embed.base import Embedder, model_prefixes
from octobrain.embed.factory import get_embedder
from octobrain.embed.hashed import HashEmbedder
from octobrain.errors import EmbeddingError, InvalidInput
from octobrain.modelspec import BUNDLED_MODEL_ID, parse_model_spec
from tests.embed_support import VENDORED, VENDORED_SHA256, cos
from tests.embed_support import _isolated as _isolated  # the fixture, shared

# ---- model strings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "minilm",
        " MiniLM ",
        "fastembed:sentence-transformers/all-MiniLM-L6-v2",
        "fastembed:all-MiniLM-L6-v2",
        "fastembed:Qdrant/all-MiniLM-L6-v2-onnx",
    ],
)
def test_bundled_model_aliases(spec: str):
    parsed = parse_model_spec(spec)
    assert parsed.bundled
    assert parsed.model_id == BUNDLED_MODEL_ID


@pytest.mark.parametrize(
    ("spec", "model_id"),
    [
        ("fastembed:BAAI/bge-small-en-v1.5", "fastembed:baai/bge-small-en-v1.5"),
        ("fastembed:baai/BGE-small-en-v1.5", "fastembed:baai/bge-small-en-v1.5"),
        ("OpenAI:text-embedding-3-small", "openai:text-embedding-3-small"),
        ("voyage:voyage-3.5-lite", "voyage:voyage-3.5-lite"),
        ("jina:jina-embeddings-v3", "jina:jina-embeddings-v3"),
        ("hash:064", "hash:64"),
    ],
)
def test_model_ids_are_canonical(spec: str, model_id: str):
    assert parse_model_spec(spec).model_id == model_id


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ("", 'must be "minilm" or PROVIDER:MODEL'),
        ("bge-small", 'must be "minilm" or PROVIDER:MODEL'),
        ("openai:", 'must be "minilm" or PROVIDER:MODEL'),
        ("word2vec:google-news", 'unknown provider "word2vec"'),
        ("hash:7", "8..4096"),
        ("hash:abc", "8..4096"),
        ("fastembed:two words", "no spaces"),
    ],
)
def test_bad_model_strings(spec: str, rule: str):
    with pytest.raises(InvalidInput) as info:
        parse_model_spec(spec)
    assert info.value.field == "embedding.model"
    assert rule in str(info.value)


def test_query_and_document_prefixes_per_model_family():
    assert model_prefixes("nomic-ai/nomic-embed-text-v1.5") == (
        "search_query: ",
        "search_document: ",
    )
    assert model_prefixes("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    query, doc = model_prefixes("BAAI/bge-small-en-v1.5")
    assert query == "Represent this sentence for searching relevant passages: " and doc == ""
    assert model_prefixes("sentence-transformers/all-MiniLM-L6-v2") == ("", "")
    assert model_prefixes("jinaai/jina-embeddings-v3") == ("", "")  # fastembed sets its task


# ---- the hash embedder -----------------------------------------------------------------------


def test_hash_embedder_shapes_norms_and_determinism():
    e = get_embedder("hash:64")
    assert isinstance(e, Embedder) and e.dim == 64 and e.model_id == "hash:64"
    docs = e.embed_documents(["alpha beta", "", "gamma"])
    assert docs.shape == (3, 64) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(docs, HashEmbedder(64).embed_documents(["alpha beta", "", "gamma"]))
    q = e.embed_query("alpha beta")
    assert q.shape == (64,)
    assert np.allclose(q, docs[0])
    assert e.embed_query(["alpha beta", "gamma"]).shape == (2, 64)
    assert e.embed_documents([]).shape == (0, 64)


def test_hash_embedder_similar_texts_are_closer():
    e = HashEmbedder(256)
    q = e.embed_query("rate limiting for the API")
    near, stem, far = e.embed_documents(
        [
            "the API uses rate limiting with a token bucket",
            "limits on request rates",
            "the cat sat on the mat",
        ]
    )
    assert cos(q, near) > cos(q, far)
    assert cos(q, stem) > cos(q, far), "character trigrams relate rate/rates, limiting/limits"


def test_batching_does_not_change_vectors():
    texts = [f"memory number {i} about topic {i % 7}" for i in range(23)]
    one = HashEmbedder(128, batch_size=1).embed_documents(texts)
    big = HashEmbedder(128, batch_size=10).embed_documents(texts)
    assert np.allclose(one, big, atol=1e-7)


def test_bad_inputs_name_the_argument():
    e = get_embedder("hash:32")
    with pytest.raises(InvalidInput, match=r"^texts: must be a list of strings, not a single"):
        e.embed_documents("just one string")
    with pytest.raises(InvalidInput, match=r"^texts: item 1 must be a string, not int"):
        e.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"^query: item 0"):
        e.embed_query([None])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=r"^embedding.batch_size"):
        HashEmbedder(32, batch_size=0)


def test_get_embedder_is_cached_per_settings():
    assert get_embedder("hash:32") is get_embedder(" HASH:32")
    assert get_embedder("hash:32") is not get_embedder("hash:32", batch_size=7)


def test_embedder_from_config(tmp_path: Path):
    from octobrain.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('[embedding]\nmodel = "hash:48"\nbatch_size = 3\n', encoding="utf-8")
    config = load_config(path)
    e = factory.embedder_from_config(config)
    assert e.model_id == "hash:48" and isinstance(e, HashEmbedder) and e.batch_size == 3
    assert factory.embedder_from_config(config.embedding) is e


def test_construction_is_lazy_and_imports_nothing_heavy():
    probe = (
        "import sys\n"
        "from octobrain.embed.factory import get_embedder\n"
        "import octobrain.config, octobrain.scope, octobrain.cli.main\n"
        "e = get_embedder('minilm'); assert e.dim == 384\n"
        "get_embedder('fastembed:BAAI/bge-small-en-v1.5')\n"
        "print([m for m in ('fastembed', 'onnxruntime', 'lancedb', 'httpx', 'tokenizers')"
        " if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


# ---- fastembed models other than the bundled one -----------------------------------------------


def test_uncached_model_fails_at_once_when_downloads_are_off():
    e = get_embedder("fastembed:BAAI/bge-small-en-v1.5")
    start = time.monotonic()
    with pytest.raises(EmbeddingError) as info:
        e.embed_query("hello")
    assert time.monotonic() - start < 5.0
    message = str(info.value)
    assert "not in the fastembed cache" in message
    assert "embedding.allow_download" in message and "OCTOBRAIN_EMBEDDING_ALLOW_DOWNLOAD" in message
    assert 'embedding.model = "minilm"' in message


def test_uncached_model_fails_at_once_when_the_hub_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    e = get_embedder("fastembed:BAAI/bge-small-en-v1.5", allow_download=True)
    start = time.monotonic()
    with pytest.raises(EmbeddingError, match="unreachable"):
        e.embed_documents(["hello"])
    assert time.monotonic() - start < 5.0


def test_unknown_fastembed_model_is_bad_input():
    e = get_embedder("fastembed:nobody/no-such-model")
    with pytest.raises(InvalidInput, match=r"^embedding.model: fastembed has no model"):
        e.embed_query("x")
    with pytest.raises(InvalidInput, match=r"^embedding.model"):
        _ = e.dim


@pytest.mark.slow
def test_cached_fastembed_model_loads_offline_with_its_prefixes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A model already in the fastembed cache loads without the network, with its prefixes.

    The cache entry is built by hand in the hub's layout, holding the bundled MiniLM files under
    bge-small's name (same dimension), so no download is needed to exercise this path.
    """
    cache = tmp_path / "fe-cache"
    repo = cache / "models--Qdrant--bge-small-en-v1.5-onnx-Q"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    os.symlink(local.bundled_onnx_path(), snapshot / "model_optimized.onnx")
    for name in VENDORED_SHA256:
        (snapshot / name).write_bytes((VENDORED / name).read_bytes())
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(cache))
    monkeypatch.setattr(local, "_LOADED", {})

    e = get_embedder("fastembed:BAAI/bge-small-en-v1.5", batch_size=4)
    q = e.embed_query("rate limiting")
    d = e.embed_documents(["rate limiting"])[0]
    assert e.dim == 384 and q.shape == (384,)
    assert cos(q, d) < 0.99, "the query carries bge's retrieval instruction, the document not"
    instructed = e.embed_documents(
        ["Represent this sentence for searching relevant passages: rate limiting"]
    )[0]
    assert np.allclose(q, instructed, atol=1e-5)


def test_dim_of_a_fastembed_model_comes_without_weights():
    assert get_embedder("fastembed:BAAI/bge-base-en-v1.5").dim == 768
