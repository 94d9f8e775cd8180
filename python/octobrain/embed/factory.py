"""`get_embedder(model)`: the embedder a model string names, one per process per settings."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from octobrain.embed.base import Embedder
from octobrain.modelspec import parse_model_spec

if TYPE_CHECKING:
    from octobrain.config import Config, EmbeddingConfig

__all__ = ["embedder_from_config", "facade_parts", "get_embedder"]

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

    Cheap: nothing is imported, loaded or requested until the first text is embedded (or, for
    the bundled model, `prepare` is called). A cloud
    provider whose API key env var is unset fails here, with the variable's name.
    """
    from octobrain.config import Config, EmbeddingConfig, check_config

    spec = parse_model_spec(model)
    # The rules of the `[embedding]` keys these are (a batch size of 0 or "32" failed later).
    settings = EmbeddingConfig(
        model=model,
        batch_size=batch_size,
        timeout_secs=timeout_secs,
        allow_download=allow_download,
        base_url=base_url,
    )
    check_config(Config(embedding=settings))
    key = (spec.model_id, batch_size, allow_download, timeout_secs, base_url)
    with _CACHE_LOCK:
        if key in _EMBEDDERS:
            return _EMBEDDERS[key]
        embedder: Embedder
        if spec.provider == "hash":
            from octobrain.embed.hashed import HashEmbedder

            embedder = HashEmbedder(int(spec.name), batch_size)
        elif spec.provider == "fastembed":
            from octobrain.embed.local import LocalEmbedder

            embedder = LocalEmbedder(spec, batch_size, allow_download)
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


def facade_parts(config: object, embedder: object, uri: object) -> tuple[Config, Embedder, str]:
    """What a facade (`Brain`, `Knowledge`) is built from, checked when it is built: `config`
    a `Config` (None: `load_config()`), `embedder` an `Embedder` (None: the one the config
    names), `uri` a path or URI (None: the config's store). A wrong one is `InvalidInput`
    naming it (it was an AttributeError from deep inside, or a store at `str(uri)`)."""
    from octobrain.config import Config, check_config, load_config, resolve_storage_uri
    from octobrain.config.rules import storage_uri_rule
    from octobrain.errors import InvalidInput

    if config is None:
        config = load_config()
    elif not isinstance(config, Config):
        raise InvalidInput(
            "config", f"must be an octobrain.Config (or None), got {type(config).__name__}"
        )
    else:
        check_config(config)
    if embedder is None:
        embedder = embedder_from_config(config)
    elif not isinstance(embedder, Embedder):
        named = f" (by name: get_embedder({embedder!r}))" if isinstance(embedder, str) else ""
        raise InvalidInput(
            "embedder",
            f"must be an octobrain.Embedder (or None), got {type(embedder).__name__}{named}",
        )
    if uri is None:
        uri = resolve_storage_uri(config)
    elif not isinstance(uri, str | os.PathLike):
        raise InvalidInput(
            "uri", f"must be a path or a storage URI (or None), got {type(uri).__name__}"
        )
    elif (problem := storage_uri_rule(str(uri))) is not None:
        # (as `storage.uri` is checked: a `file://` one opened its tables where it named, and
        # its write lock and records under `./file:/…`, another in each working directory)
        raise InvalidInput("uri", problem)
    return config, embedder, str(uri)
