"""`memorize` and `remember` on a local store vs a team store on S3, side by side in one run.

The S3 endpoint is moto in server mode on loopback, started as its own process (as a team's
MinIO or S3 would be), so the figures show octobrain's extra round trips — the write lease, the
commit's object puts, the version probe that keeps the mirror fresh — not network distance. Add
your network's round-trip time per request to estimate a real bucket.

    python benches/shared_store.py --data ../shared/data/scifact --size 1000 --update README.md
    (or `make bench-team`)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from octobrain.bench.datasets import load_beir
from octobrain.config import Config, StorageConfig
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from octobrain.store import seen
from remember_latency import _memories, _vectors
from report import check_update, publish


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto_server did not start")


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values) * 1000, q)), 1)


def measure(
    brain: Brain, memories: list[Memory], vectors: np.ndarray, queries: list[str]
) -> dict[str, float]:
    """Bulk-load, then time single memorize calls and remember calls on `brain`."""
    size = len(memories)
    for start in range(0, size, 1000):
        brain.store.add(memories[start : start + 1000], vectors[start : start + 1000])
    brain.remember(queries[0])  # warm: mirror build, model session
    writes = []
    for i, q in enumerate(queries[:30]):
        t0 = time.perf_counter()
        brain.memorize(f"Team note {i}", f"A decision recorded while asking: {q}")
        writes.append(time.perf_counter() - t0)
    reads = []
    for q in queries:
        t0 = time.perf_counter()
        brain.remember(q, record_access=False)
        reads.append(time.perf_counter() - t0)
    with_access = []
    for q in queries[:50]:
        t0 = time.perf_counter()
        brain.remember(q)
        with_access.append(time.perf_counter() - t0)
    return {
        "memories": size,
        "memorize_p50_ms": _ms(writes, 50),
        "memorize_p95_ms": _ms(writes, 95),
        "remember_p50_ms": _ms(reads, 50),
        "remember_p95_ms": _ms(reads, 95),
        "remember_with_access_p50_ms": round(statistics.median(with_access) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/scifact"))
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--update", type=Path, help="rewrite the table in this README")
    args = parser.parse_args()
    check_update(parser, args.update, "team")

    import boto3

    queries = load_beir(args.data).query_texts[: args.queries]
    embedder = get_embedder(args.model, batch_size=64)
    memories = _memories(args.data, args.size)
    vectors = _vectors(
        embedder.model_id, [m.searchable_text() for m in memories], embedder.embed_documents
    )
    moto, endpoint = _start_moto()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    bucket = f"team-{uuid.uuid4().hex[:8]}"
    team = f"s3://{bucket}/octobrain"
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
            Bucket=bucket
        )
        options = (f"aws_endpoint={endpoint}", "region=us-east-1", "allow_http=true")
        remote = Config(storage=StorageConfig(uri=team, options=options))
        results = {}
        with seen.scratch("octobrain-team-") as tmp:  # (no mark of its store left behind)
            local = Brain("bench/team", config=Config(), embedder=embedder, uri=tmp)
            results["local disk"] = measure(local, memories, vectors, queries)
            local.flush()  # the queued access counts, while the store is still there
        shared = Brain("bench/team", config=remote, embedder=embedder)
        results["S3 (moto, loopback)"] = measure(shared, memories, vectors, queries)
        shared.flush()  # the queued access counts, while the endpoint is still up
    finally:
        moto.kill()
        seen.forget(team)  # (the bucket goes with moto: no mark of it left behind)
    lines = [
        "| store | memories | memorize p50 / p95 | remember p50 / p95 | remember with access p50 |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['memories']:,} | {r['memorize_p50_ms']} / {r['memorize_p95_ms']} ms"
            f" | {r['remember_p50_ms']} / {r['remember_p95_ms']} ms"
            f" | {r['remember_with_access_p50_ms']} ms |"
        )
    table = "\n".join(lines)
    table += (
        f"\n\nModel `{embedder.model_id}`, {len(queries)} SciFact claims as queries, both stores "
        "in one run; `make bench-team`."
    )
    publish(table, results, "team", args.update, args.json)


if __name__ == "__main__":
    main()
