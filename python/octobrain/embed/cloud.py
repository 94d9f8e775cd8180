"""Cloud embedders (OpenAI, Voyage, Jina) over HTTPS with httpx.

Opt-in only: used when `embedding.model` names the provider. The API key comes from the
provider's environment variable; nothing is sent until the first text is embedded. Every failure
(bad key, server error, timeout, malformed answer) is an `EmbeddingError` that says what happened
and never contains the key.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.embed.base import BaseEmbedder, Kind
from octobrain.errors import EmbeddingError, InvalidInput, as_json

__all__ = ["PROVIDERS", "CloudEmbedder", "Provider"]


@dataclass(frozen=True)
class Provider:
    """What differs between the providers' embedding endpoints."""

    name: str
    key_env: str
    base_url: str
    max_batch: int  # the API's cap on inputs per request
    known_dims: tuple[tuple[str, int], ...]

    def payload(self, model: str, texts: list[str], kind: Kind) -> dict[str, Any]:
        """The JSON body of one request."""
        body: dict[str, Any] = {"model": model, "input": texts}
        if self.name == "openai":
            body["encoding_format"] = "float"
        elif self.name == "voyage":
            body["input_type"] = kind  # "query" | "document"
        elif self.name == "jina" and any(v in model for v in ("-v3", "-v4")):
            body["task"] = "retrieval.query" if kind == "query" else "retrieval.passage"
        return body


PROVIDERS = {
    "openai": Provider(
        "openai", "OPENAI_API_KEY", "https://api.openai.com/v1", 2048,
        (("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072),
         ("text-embedding-ada-002", 1536)),
    ),
    "voyage": Provider(
        "voyage", "VOYAGE_API_KEY", "https://api.voyageai.com/v1", 1000,
        (("voyage-3.5", 1024), ("voyage-3.5-lite", 1024), ("voyage-3", 1024),
         ("voyage-3-lite", 512), ("voyage-3-large", 1024), ("voyage-code-3", 1024)),
    ),
    "jina": Provider(
        "jina", "JINA_API_KEY", "https://api.jina.ai/v1", 2048,
        (("jina-embeddings-v3", 1024), ("jina-embeddings-v2-base-en", 768),
         ("jina-embeddings-v2-base-code", 768)),
    ),
}  # fmt: skip


class CloudEmbedder(BaseEmbedder):
    """An embedding API reached over HTTPS; vectors are re-normalised locally."""

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        batch_size: int = 32,
        timeout_secs: float = 30.0,
        base_url: str = "",
    ) -> None:
        if provider not in PROVIDERS:
            raise InvalidInput("embedding.model", f"unknown cloud provider {as_json(provider)}")
        if not timeout_secs > 0:
            raise InvalidInput("embedding.timeout_secs", "must be > 0")
        self._provider = PROVIDERS[provider]
        super().__init__(f"{provider}:{model}", min(batch_size, self._provider.max_batch))
        self._api_key = os.environ.get(self._provider.key_env, "").strip()
        if not self._api_key:
            raise EmbeddingError(
                f"{provider}: the environment variable {self._provider.key_env} is not set; "
                f"export your {provider} API key there to use embedding.model = "
                f'"{provider}:{model}"'
            )
        self._model = model
        self._url = (base_url or self._provider.base_url).rstrip("/") + "/embeddings"
        self._timeout = timeout_secs
        self._dim: int | None = dict(self._provider.known_dims).get(model)
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector dimension; for a model not in the table, one probe request finds it."""
        if self._dim is None:
            self._embed_batch(["dimension probe"], "document")
        assert self._dim is not None
        return self._dim

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(
                    timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 5.0)),
                    headers={"Authorization": f"Bearer {self._api_key}"},
                )
            return self._client

    def _embed_batch(self, texts: list[str], kind: Kind) -> npt.NDArray[Any]:
        import httpx

        name = self._provider.name
        body = self._provider.payload(self._model, texts, kind)
        try:
            resp = self._http().post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise EmbeddingError(
                f"{name}: no answer from {self._url} within {self._timeout:g} s "
                "(raise embedding.timeout_secs if the service is slow)"
            ) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{name}: cannot reach {self._url}: {exc}") from exc
        if resp.status_code in (401, 403):
            raise EmbeddingError(
                f"{name}: {self._url} refused the API key (HTTP {resp.status_code}); "
                f"check {self._provider.key_env}"
            )
        if resp.status_code >= 400:
            detail = " ".join(resp.text.split())[:200]
            raise EmbeddingError(f"{name}: HTTP {resp.status_code} from {self._url}: {detail}")
        return self._parse(resp, len(texts))

    def _parse(self, resp: Any, expected: int) -> npt.NDArray[Any]:
        name = self._provider.name
        try:
            items = resp.json()["data"]
            items = sorted(items, key=lambda it: it.get("index", 0))
            rows = np.asarray([it["embedding"] for it in items], dtype=np.float64)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingError(f"{name}: malformed answer from {self._url}: {exc!r}") from exc
        if rows.ndim != 2 or rows.shape[0] != expected or rows.shape[1] == 0:
            raise EmbeddingError(
                f"{name}: expected {expected} vectors from {self._url}, got shape {rows.shape}"
            )
        if self._dim is None:
            self._dim = int(rows.shape[1])
        elif rows.shape[1] != self._dim:
            raise EmbeddingError(
                f"{name}: {self._model} returned {rows.shape[1]}-d vectors, expected {self._dim}"
            )
        return rows

    def close(self) -> None:
        """Close the HTTP connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
