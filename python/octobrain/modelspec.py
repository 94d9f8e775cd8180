"""The grammar of `embedding.model`: which model a string names.

`minilm` (and its aliases) is the bundled all-MiniLM-L6-v2; `fastembed:<name>`, `openai:<model>`,
`voyage:<model>`, `jina:<model>` and `hash:<dim>` name the others. A leaf: `config` validates the
key with it and `octobrain.embed` builds the embedder it names, so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from octobrain.errors import InvalidInput, as_json

__all__ = ["BUNDLED_MODEL_ID", "CLOUD_PROVIDERS", "ModelSpec", "parse_model_spec"]

# fastembed matches names case-insensitively, so its ids are lowercased: one model, one id.
BUNDLED_MODEL_ID = "fastembed:sentence-transformers/all-minilm-l6-v2"
BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
BUNDLED_ALIASES = {
    "minilm",
    "fastembed:sentence-transformers/all-minilm-l6-v2",
    "fastembed:all-minilm-l6-v2",
    "fastembed:qdrant/all-minilm-l6-v2-onnx",  # upstream 0.14's default name for the same model
}
CLOUD_PROVIDERS = ("openai", "voyage", "jina")


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
    if text.lower() in BUNDLED_ALIASES:
        return ModelSpec("fastembed", BUNDLED_NAME, bundled=True)
    provider, sep, name = text.partition(":")
    provider, name = provider.strip().lower(), name.strip()
    if not sep or not name:
        raise InvalidInput(
            "embedding.model",
            'must be "minilm" or PROVIDER:MODEL with PROVIDER one of fastembed, openai, voyage, '
            f"jina, hash (got {as_json(spec)})",
        )
    if provider == "hash":
        if not name.isdigit() or not 8 <= int(name) <= 4096:
            raise InvalidInput(
                "embedding.model", f"hash:<dim> needs a dim in 8..4096 (got {as_json(spec)})"
            )
        return ModelSpec("hash", str(int(name)))
    if provider == "fastembed" or provider in CLOUD_PROVIDERS:
        if any(c.isspace() for c in name):
            raise InvalidInput(
                "embedding.model", f"a model name has no spaces (got {as_json(spec)})"
            )
        return ModelSpec(provider, name)  # type: ignore[arg-type]
    raise InvalidInput(
        "embedding.model",
        f"unknown provider {as_json(provider)}: use fastembed, openai, voyage, jina or hash",
    )
