"""The bundled model run directly on `tokenizers` and `onnxruntime`, without importing fastembed.

fastembed's package import pulls in its download, image and logging stack (huggingface_hub,
requests, PIL, loguru): about half a second of every new process that embeds a query, for a
model that never downloads anything. This runs the same pipeline fastembed runs for a
mean-pooled sentence-transformers model — the tokenizer truncated to `model_max_length` and
padded to the longest text, one onnxruntime session with every graph optimisation, the
attention-masked mean of the last hidden state summed in float64, L2-normalised — so the
vectors are fastembed's (tested against it) and stores written either way stay one model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.errors import EmbeddingError

__all__ = ["KEPT_TOKENS", "MeanPooledOnnx"]

# What a run may need (texts × padded tokens) without its arena being handed back afterwards
# (`MeanPooledOnnx.give_back`): a query's or a memory's, which the next call needs again.
KEPT_TOKENS = 512


class MeanPooledOnnx:
    """A mean-pooled, normalised sentence embedding model: an ONNX file and its tokenizer files.

    `model_dir` holds `model.onnx`, `tokenizer.json` and `tokenizer_config.json` (the layout
    `local.bundled_model_dir` makes). Thread-safe: onnxruntime sessions run concurrently and
    the tokenizer is only read.

    `optimize=False` builds the session without onnxruntime's graph optimisations, for a
    process that embeds a few texts and exits: in a new process the session took 0.06 s
    instead of 0.26 s to build, and its first query 0.09 s instead of 0.035 s (medians of 6
    fresh processes each; a query in a long-lived process takes 14 ms instead of 5, so
    everything else keeps them). The vectors differ by about 1e-7 (tested under 1e-6, the
    tolerance to fastembed's).
    """

    def __init__(self, model_dir: Path, *, optimize: bool = True) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        padding = tokenizer.padding or {}
        pad_token = padding.get("pad_token") or config.get("pad_token")
        pad_id = padding.get("pad_id", tokenizer.token_to_id(pad_token) if pad_token else None)
        if not isinstance(pad_token, str) or not isinstance(pad_id, int):
            raise EmbeddingError(f"{model_dir / 'tokenizer.json'} names no padding token")
        # The file's own settings (fixed length 128) are not the model's: truncate at the
        # model's context and pad a batch to its longest text, as fastembed does.
        tokenizer.enable_truncation(
            max_length=int(config["model_max_length"]),
            direction=config.get("truncation_side") or "right",
        )
        tokenizer.enable_padding(
            direction=config.get("padding_side") or padding.get("direction", "right"),
            pad_id=pad_id,
            pad_type_id=padding.get("pad_type_id", 0),
            pad_token=pad_token,
        )
        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if optimize
            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model_dir / "model.onnx"),
            providers=["CPUExecutionProvider"],
            sess_options=options,
        )
        self._inputs = {node.name for node in self._session.get_inputs()}
        self._tokenizer = tokenizer
        self._release = ort.RunOptions()
        self._release.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._outgrown = False  # a run since the last `give_back` needed more than KEPT_TOKENS

    def unknown_share(self, text: str) -> float:
        """The share of `text`'s word pieces this model's vocabulary lacks ([UNK]): Thai,
        Amharic or emoji are one unknown piece a word, so their vector says nothing of them."""
        pieces = self._tokenizer.encode(text, add_special_tokens=False).ids
        unknown = self._tokenizer.token_to_id("[UNK]")
        return sum(p == unknown for p in pieces) / len(pieces) if pieces else 0.0

    def embed(self, texts: list[str], run_texts: int) -> npt.NDArray[np.float32]:
        """One unit vector per text (at least one), `run_texts` texts per onnxruntime run."""
        runs = [self._run(texts[i : i + run_texts]) for i in range(0, len(texts), run_texts)]
        return runs[0] if len(runs) == 1 else np.concatenate(runs)

    def give_back(self) -> None:
        """Hand back what onnxruntime's memory arena holds beyond a short text's needs.

        The arena keeps, for the session's life, what its largest run needed, and a run's
        attention grows with texts × tokens²: an MCP server or resident service that had
        indexed a 105 KB document held 260-270 MB more for good. Called once a long-lived
        process is done with such work (`heap.trim_heap`, which the server and the service
        run after it), not after every run: a bulk embedding reuses what its first run took.
        A run of one short text with onnxruntime's shrink option frees the rest (a few ms);
        nothing is done when no run outgrew `KEPT_TOKENS` since the last time."""
        if self._outgrown:
            self._outgrown = False
            self._run(["."], release=True)

    def _run(self, texts: list[str], *, release: bool = False) -> npt.NDArray[np.float32]:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        if ids.size > KEPT_TOKENS:
            self._outgrown = True
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed: dict[str, Any] = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed, self._release if release else None)[0]
        summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        vectors: npt.NDArray[np.float32] = (pooled / norms).astype(np.float32)
        return vectors
