"""Embedders: the protocol, the bundled offline model (fastembed), cloud providers, the
deterministic hash embedder for tests, the on-disk embedding cache and token counting."""
