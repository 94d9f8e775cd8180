"""The Python faces of the Rust kernels (`octobrain._core`): BM25, fusion, the hybrid
ranker, vector blocks, cosine clustering, decay and regex matching. Shared by the memory engine
and knowledge; below them, above the leaves."""
