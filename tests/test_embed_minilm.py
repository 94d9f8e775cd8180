"""The bundled model itself (real weights; loaded once): its vectors match onnxruntime's and
fastembed's, batches match single calls, runs and memory are bounded, threads sleep between runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.embed import local
from octobrain.embed.base import Embedder
from octobrain.embed.factory import get_embedder
from octobrain.embed.hashed import HashEmbedder
from octobrain.embed.local import bundled_model_dir
from octobrain.modelspec import BUNDLED_MODEL_ID
from tests.embed_support import VENDORED, cos
from tests.embed_support import _isolated as _isolated  # the fixture, shared

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
