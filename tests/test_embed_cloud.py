"""Cloud embedders against a real local HTTP server: request shape, batching, errors."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from octobrain.embed.cloud import CloudEmbedder
from octobrain.embed.factory import get_embedder
from octobrain.errors import EmbeddingError, InvalidInput

KEY = "sk-test-SECRET-123"
Reply = tuple[int, Any]  # (status, JSON body or raw text)


def vectors_for(texts: list[str], dim: int = 4) -> list[dict[str, Any]]:
    """A deterministic non-normalised vector per text, returned in reverse index order."""
    rows = [
        {"index": i, "embedding": [float(len(t)), 1.0, float(i), 2.0][:dim] + [0.5] * (dim - 4)}
        for i, t in enumerate(texts)
    ]
    return rows[::-1]


@dataclass
class FakeApi:
    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    reply: Callable[[dict[str, Any]], Reply] = lambda body: (
        200,
        {"data": vectors_for(body["input"])},
    )
    delay: float = 0.0


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    for name in ("OPENAI_API_KEY", "VOYAGE_API_KEY", "JINA_API_KEY"):
        monkeypatch.setenv(name, KEY)
    state: dict[str, FakeApi] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            fake = state["api"]
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            fake.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if fake.delay:
                time.sleep(fake.delay)
            status, payload = fake.reply(body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state["api"] = FakeApi(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    yield state["api"]
    server.shutdown()
    server.server_close()


def make(api: FakeApi, spec: str = "openai:text-embedding-3-small", **kw: Any) -> CloudEmbedder:
    kw.setdefault("base_url", api.base_url)
    provider, model = spec.split(":", 1)
    return CloudEmbedder(provider, model, **kw)


def test_missing_key_names_the_env_var_and_sends_nothing(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
):
    for provider, env in (("openai", "OPENAI_API_KEY"), ("voyage", "VOYAGE_API_KEY"),
                          ("jina", "JINA_API_KEY")):  # fmt: skip
        monkeypatch.delenv(env)
        with pytest.raises(EmbeddingError, match=env):
            get_embedder(f"{provider}:some-model", base_url=api.base_url)
    assert api.requests == []


def test_construction_sends_no_request(api: FakeApi):
    e = make(api)
    assert e.dim == 1536  # known model: no probe either
    assert api.requests == []


def test_openai_request_shape_batching_order_and_normalisation(api: FakeApi):
    api.reply = lambda body: (200, {"data": vectors_for(body["input"], dim=1536)})
    e = make(api, batch_size=2)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    out = e.embed_documents(texts)
    assert [len(r["body"]["input"]) for r in api.requests] == [2, 2, 1]
    first = api.requests[0]
    assert first["path"] == "/v1/embeddings"
    assert first["auth"] == f"Bearer {KEY}"
    assert first["body"] == {
        "model": "text-embedding-3-small",
        "input": ["a", "bb"],
        "encoding_format": "float",
    }
    assert out.shape == (5, 1536) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    # rows come back in input order although the server answered in reverse index order
    raw_first = np.array([len(t) for t in texts], dtype=np.float64)
    assert np.all(np.diff(out[:, 0] / out[:, 1]) > 0)
    assert np.allclose(out[:, 0] / out[:, 1], raw_first)


def test_voyage_sends_input_type(api: FakeApi):
    api.reply = lambda body: (200, {"data": vectors_for(body["input"], dim=1024)})
    e = make(api, "voyage:voyage-3.5-lite")
    e.embed_query("where is the cache?")
    e.embed_documents(["the cache lives in redis"])
    types = [r["body"]["input_type"] for r in api.requests]
    assert types == ["query", "document"]
    assert api.requests[0]["body"]["input"] == ["where is the cache?"]


def test_jina_v3_sends_retrieval_task(api: FakeApi):
    api.reply = lambda body: (200, {"data": vectors_for(body["input"], dim=1024)})
    e = make(api, "jina:jina-embeddings-v3")
    e.embed_query(["q1", "q2"])
    e.embed_documents(["d"])
    assert [r["body"]["task"] for r in api.requests] == ["retrieval.query", "retrieval.passage"]
    # v2 models have no task parameter
    api.reply = lambda body: (200, {"data": vectors_for(body["input"], dim=768)})
    make(api, "jina:jina-embeddings-v2-base-en").embed_documents(["d"])
    assert "task" not in api.requests[-1]["body"]


def test_unknown_model_dimension_is_probed_once(api: FakeApi):
    api.reply = lambda body: (200, {"data": vectors_for(body["input"], dim=12)})
    e = make(api, "openai:my-local-model")
    assert e.dim == 12
    assert e.dim == 12
    assert len(api.requests) == 1
    assert e.embed_documents([]).shape == (0, 12)


def test_401_is_a_clear_error_without_the_key(api: FakeApi):
    api.reply = lambda body: (401, {"error": {"message": f"Incorrect API key {KEY}"}})
    with pytest.raises(EmbeddingError) as info:
        make(api).embed_query("x")
    message = str(info.value)
    assert "HTTP 401" in message and "OPENAI_API_KEY" in message
    assert KEY not in message


def test_500_reports_status_and_body(api: FakeApi):
    api.reply = lambda body: (500, "upstream exploded\n  badly")
    with pytest.raises(EmbeddingError, match=r"HTTP 500 from .*: upstream exploded badly"):
        make(api).embed_documents(["x"])


def test_timeout_is_a_clear_error(api: FakeApi):
    api.delay = 1.5
    e = make(api, timeout_secs=0.3)
    start = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"no answer from .* within 0.3 s"):
        e.embed_query("x")
    assert time.monotonic() - start < 1.4


def test_unreachable_server_is_a_clear_error(api: FakeApi):
    e = make(api, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(EmbeddingError, match=r"cannot reach http://127\.0\.0\.1:9/v1/embeddings"):
        e.embed_query("x")


@pytest.mark.parametrize(
    ("reply", "rule"),
    [
        ((200, "not json"), "malformed answer"),
        ((200, {"nodata": []}), "malformed answer"),
        ((200, {"data": [{"index": 0, "embedding": [1.0, 0.0]}]}), "expected 2 vectors"),
        (
            (200, {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}),
            "returned 1-d vectors, expected 1536",
        ),
        (
            (200, {"data": [{"index": 0, "embedding": [0.0] * 1536}] * 2}),
            "all-zero vector",
        ),
    ],
)
def test_malformed_answers_are_errors(api: FakeApi, reply: Reply, rule: str):
    api.reply = lambda body: reply
    with pytest.raises(EmbeddingError, match=rule):
        make(api).embed_documents(["a", "b"])


def test_vectors_of_huge_values_are_stored_at_unit_length(api: FakeApi):
    # A float32 norm of values near 1e19 is inf: the vectors were stored as zeros, and every
    # search then refused the store as changed on disk (a stored embedding is unit length).
    api.reply = lambda body: (
        200,
        {"data": [{"index": i, "embedding": [3e19 * (i + 1)] * 1536} for i in range(2)]},
    )
    vectors = make(api).embed_documents(["a", "b"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_batch_size_is_capped_by_the_provider(api: FakeApi):
    assert make(api, "voyage:voyage-3", batch_size=5000).batch_size == 1000
    assert make(api, "openai:text-embedding-3-small", batch_size=5000).batch_size == 2048


def test_bad_settings_are_bad_input(api: FakeApi):
    with pytest.raises(InvalidInput, match=r"^embedding.timeout_secs"):
        make(api, timeout_secs=0)
    with pytest.raises(InvalidInput, match=r"^embedding.model"):
        CloudEmbedder("google", "text-embedding-004")
