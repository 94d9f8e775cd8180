"""Short, readable pure-Python references for every Rust kernel (one section per kernel).

They favour clarity over speed; the tests in this folder check that the Rust core agrees.
"""

from __future__ import annotations

import re

import numpy as np

# ---- clustering ----
# Plain agglomerative clustering over the full similarity matrix: repeatedly merge the pair of
# clusters with the highest linkage (min or mean of cross-pair cosines) that reaches the cutoff;
# ties go to the smallest (first row of A, first row of B). Clusters are kept sorted by first row.

CLUSTER_TIE_EPS = 1e-5


def cosine_clusters(
    vectors: np.ndarray,
    threshold: float,
    min_cluster_size: int,
    linkage: str = "complete",
    margins: list[float] | None = None,
) -> list[list[int]]:
    """Reference clustering. If `margins` is given, append each step's distance to a decision
    flip (linkage vs cutoff, best vs runner-up) so tests can skip knife-edge inputs."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    cutoff = threshold - CLUSTER_TIE_EPS
    clusters = [[i] for i in range(len(x))]

    def link(a: list[int], b: list[int]) -> float:
        block = sim[np.ix_(a, b)]
        return float(block.min() if linkage == "complete" else block.mean())

    while True:
        scored = [
            (link(a, b), ia, ib)
            for ia, a in enumerate(clusters)
            for ib, b in enumerate(clusters)
            if ia < ib
        ]
        if margins is not None and scored:
            values = sorted((s for s, _, _ in scored), reverse=True)
            near_cutoff = min(abs(s - cutoff) for s in values)
            top_gap = values[0] - values[1] if len(values) > 1 and values[1] >= cutoff else 1.0
            margins.append(min(near_cutoff, top_gap))
        mergeable = [(-s, clusters[ia][0], clusters[ib][0], ia, ib) for s, ia, ib in scored]
        mergeable = [m for m in mergeable if -m[0] >= cutoff]
        if not mergeable:
            break
        _, _, _, ia, ib = min(mergeable)
        clusters[ia] = clusters[ia] + clusters[ib]
        del clusters[ib]

    kept = [sorted(c) for c in clusters if len(c) >= min_cluster_size]
    return sorted(kept, key=lambda c: (-len(c), c[0]))


# ---- regex match ----
# Split every text into lines (on "\n", trailing "\r" stripped, no empty line after a final
# "\n"), search each line with `re`, report the first match per line, stop after the cap.


def split_lines(text: str) -> list[str]:
    """The lines of `text` as the kernel defines them."""
    if not text:
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def match_lines(
    texts: list[str], pattern: str, ignore_case: bool, max_matches: int, context: int
) -> tuple[list[tuple[int, int, str, int, int, list[str], list[str]]], bool]:
    """Reference line matching: (matches, truncated)."""
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found: list[tuple[int, int, str, int, int, list[str], list[str]]] = []
    for ti, text in enumerate(texts):
        lines = split_lines(text)
        for li, line in enumerate(lines):
            m = rx.search(line)
            if m is None:
                continue
            if len(found) == max_matches:
                return found, True
            before = lines[max(0, li - context) : li]
            after = lines[li + 1 : li + 1 + context]
            found.append((ti, li + 1, line, m.start(), m.end(), before, after))
    return found, False
