"""A persistent cache of document embeddings, keyed by (model, text hash).

`CachedEmbedder` wraps any `Embedder`: `embed_documents` looks every text up by the SHA-256 of
its UTF-8 bytes in one SQLite file per model and embeds only the misses (in one call, so batching
is unchanged). Queries are never cached: they are short and rarely repeat. One file per model id
(the file name is a hash of the id, so no model string reaches the file system), WAL mode, and
`INSERT OR IGNORE`, so concurrent processes sharing the cache cannot corrupt or duplicate it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from octobrain.embed.base import Embedder, EmbedderView, Vectors

__all__ = ["CachedEmbedder", "default_cache_dir"]

_LOOKUP_CHUNK = 500  # keys per SELECT … IN (…): well under SQLite's variable limit


def default_cache_dir() -> Path:
    """`<data dir>/cache/embeddings`."""
    from octobrain.config import data_dir

    return data_dir() / "cache" / "embeddings"


class CachedEmbedder(EmbedderView):
    """An `Embedder` whose document embeddings persist on disk (see the module docstring);
    queries are embedded by the wrapped model, not cached."""

    def __init__(self, inner: Embedder, directory: Path | None = None) -> None:
        super().__init__(inner)
        root = directory if directory is not None else default_cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(f"{inner.model_id}\0{inner.dim}".encode()).hexdigest()[:32]
        self.path = root / f"{name}.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
            self._db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB)")
            self._db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('model', ?), ('dim', ?)",
                (inner.model_id, str(inner.dim)),
            )
        self.hits = 0
        self.misses = 0

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Cached vectors for known texts; the rest embedded in one call and stored."""
        items = list(texts)
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in items]
        found = self._lookup(set(keys))
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            fresh = self.inner.embed_documents([items[i] for i in missing])
            rows = [(keys[i], fresh[j].astype(np.float32).tobytes()) for j, i in enumerate(missing)]
            with self._lock, self._db:
                self._db.executemany("INSERT OR IGNORE INTO vec VALUES (?, ?)", rows)
            for j, i in enumerate(missing):
                found[keys[i]] = fresh[j]
        self.hits += len(items) - len(missing)
        self.misses += len(missing)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def _lookup(self, keys: set[bytes]) -> dict[bytes, Vectors]:
        wanted = list(keys)
        found: dict[bytes, Vectors] = {}
        with self._lock:
            for start in range(0, len(wanted), _LOOKUP_CHUNK):
                part = wanted[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                for key, blob in self._db.execute(
                    f"SELECT key, v FROM vec WHERE key IN ({marks})", part
                ):
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self.dim,):  # a damaged row is simply re-embedded
                        found[bytes(key)] = vector
        return found

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._db.close()
