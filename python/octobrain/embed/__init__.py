"""Embedders: the protocol, the bundled offline model (onnxruntime), cloud providers, the
deterministic hash embedder for tests, the on-disk embedding cache and token counting."""
