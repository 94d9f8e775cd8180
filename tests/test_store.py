"""MemoryStore on real LanceDB in temp dirs: visibility, model metadata, multi-process writes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from octobrain.models import Memory
from octobrain.store import MemoryStore, ModelMismatch, NotFound
from octobrain.store.sql import Sight, sql_in
from octobrain.times import utcnow

DIM = 8


def _memories(n: int, scope: str = "") -> list[Memory]:
    return [
        Memory(title=f"title {i}", content=f"content number {i}", scope=scope) for i in range(n)
    ]


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_scope_visibility(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "hash:8", DIM)
    a, b, g = _memories(1, "p/a")[0], _memories(1, "p/b")[0], _memories(1, "")[0]
    store.add([a, b, g], _vectors(3))
    assert store.get(a.id, Sight("p/a")).id == a.id
    assert store.get(g.id, Sight("p/a")).id == g.id
    with pytest.raises(NotFound, match="memory_id: no memory"):
        store.get(b.id, Sight("p/a"))
    with pytest.raises(NotFound):
        store.get(a.id, Sight(""))
    seen = {r["id"] for r in store.scan(Sight("p/a").where())}
    assert seen == {a.id, g.id}


def test_quotes_in_data_never_escape_the_filter(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "hash:8", DIM)
    store.add(_memories(2, "p/a"), _vectors(2))
    hostile = "x' OR scope != '"
    assert store.scan(Sight(hostile).where()) == []
    assert store.scan(sql_in("id", [hostile])) == []


def test_vector_search_returns_true_cosine(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "hash:8", DIM)
    vectors = _vectors(4)
    mems = _memories(4)
    store.add(mems, vectors)
    addrs, cosines = store.vector_search(vectors[2], Sight("").where(), 4)
    rows = store.memories.search().select(["id", "_rowaddr"]).to_arrow()
    id_at = dict(zip(rows["_rowaddr"].to_pylist(), rows["id"].to_pylist(), strict=True))
    assert id_at[int(addrs[0])] == mems[2].id
    assert cosines[0] == pytest.approx(1.0, abs=1e-5)
    expected = sorted((float(vectors[2] @ v) for v in vectors), reverse=True)
    assert list(cosines) == pytest.approx(expected, abs=1e-5)


def test_model_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    MemoryStore(tmp_path, "hash:8", DIM).add(_memories(1), _vectors(1))
    with pytest.raises(ModelMismatch, match="octobrain memory reembed"):
        MemoryStore(tmp_path, "minilm", 384).count()
    # The data is untouched by the refused open.
    assert MemoryStore(tmp_path, "hash:8", DIM).count() == 1


def test_access_is_throttled_and_persisted(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "hash:8", DIM)
    mem = _memories(1)[0]
    store.add([mem], _vectors(1))
    later = utcnow() + timedelta(hours=2)
    store.record_access([mem.id], later, min_interval=timedelta(hours=1))
    store.record_access([mem.id], later + timedelta(minutes=5), min_interval=timedelta(hours=1))
    reopened = MemoryStore(tmp_path, "hash:8", DIM).get(mem.id, Sight(""))
    assert reopened.access_count == 1
    assert reopened.last_accessed == later


def test_delete_removes_edges(tmp_path: Path) -> None:
    from octobrain.models import Relationship, RelationshipType

    store = MemoryStore(tmp_path, "hash:8", DIM)
    a, b = _memories(2)
    edge = Relationship(a.id, b.id, RelationshipType.RELATED_TO)
    store.add([a, b], _vectors(2), [edge])
    assert len(store.relationships_of([b.id])) == 1
    assert store.delete([a.id]) == 1
    assert store.relationships_of([b.id]) == []
    assert store.count() == 1


WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pathlib import Path
    from octobrain.models import Memory
    from octobrain.store import MemoryStore

    root, worker, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = MemoryStore(root, "hash:8", 8)
    for i in range(n):
        m = Memory(title=f"worker {worker} item {i}", content=f"content {worker} {i}")
        store.add([m], np.ones((1, 8), dtype=np.float32))
        print(m.id, flush=True)  # acknowledged only after add() returned
    """
)


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(w), "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for w in range(3)
    ]
    acknowledged: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        acknowledged += out.split()
    store = MemoryStore(tmp_path, "hash:8", DIM)
    ids = [r["id"] for r in store.scan("true", columns=["id"])]
    assert len(acknowledged) == 600
    assert len(ids) == 600 == len(set(ids))
    assert set(ids) == set(acknowledged)


def test_periodic_maintenance_compacts_and_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.store import upkeep as module

    monkeypatch.setattr(module, "COMPACT_EVERY", 16)
    monkeypatch.setattr(module, "SCALAR_INDEX_MIN_ROWS", 10)
    monkeypatch.setattr(module, "VECTOR_INDEX_MIN_ROWS", 300)
    store = MemoryStore(tmp_path, "hash:8", DIM)
    store.add(_memories(300, "p/a"), _vectors(300))
    for i in range(40):  # many one-row commits: the pattern of an agent memorizing
        store.add(_memories(1, "p/a"), _vectors(1, seed=i + 1))
    indexed = {ix.columns[0] for ix in store.memories.list_indices()}
    assert {"id", "title", "scope", "state", "embedding"} <= indexed
    assert store.memories.stats()["fragment_stats"]["num_fragments"] < 10
    assert store.count() == 340


# Builds an IVF index on too few rows for its partitions, which LanceDB logs a warning about.
NOISY_INDEX = textwrap.dedent(
    """
    import sys
    import numpy as np, pyarrow as pa
    from octobrain.store.location import StoreLocation
    db = StoreLocation(sys.argv[1]).connect()
    v = np.random.default_rng(0).random((600, 16), dtype=np.float32)
    t = db.create_table("t", pa.table({"vector": pa.FixedSizeListArray.from_arrays(
        pa.array(v.ravel()), 16)}))
    t.create_index(metric="cosine", num_partitions=64, num_sub_vectors=4,
                   vector_column_name="vector")
    print("indexed")
    """
)


@pytest.mark.parametrize(("level", "shown"), [(None, False), ("warn", True)])
def test_lancedb_log_lines_stay_off_stderr_unless_asked(
    tmp_path: Path, level: str | None, shown: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    if level is not None:
        env["LANCEDB_LOG"] = level
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", NOISY_INDEX, str(tmp_path / "db")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip() == "indexed", done.stderr
    assert ("WARN" in done.stderr) is shown, done.stderr


LANCEDB_IMPORT = textwrap.dedent(
    """
    import gc, sys
    import pydantic
    from pydantic._internal._validate_call import ValidateCallWrapper

    from octobrain.store import MemoryStore

    eager = pydantic.validate_call
    store = MemoryStore(sys.argv[1], "hash:8", 8)
    store.count()
    assert pydantic.validate_call is eager, "validate_call left patched"

    def loaded():
        apis = [m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api")]
        wrappers = [o for o in gc.get_objects() if isinstance(o, ValidateCallWrapper)]
        return len(apis), len(wrappers)

    print(*loaded())
    from lance_namespace_urllib3_client import ApiClient
    from lance_namespace_urllib3_client.api.table_api import TableApi

    try:
        TableApi(ApiClient()).describe_table(id=123)
    except pydantic.ValidationError as exc:
        print("rejected", exc.errors()[0]["loc"][0])
    apis, wrappers = loaded()
    print(apis > 5, wrappers > 100)
    """
)


def _probe(script: str, tmp_path: Path) -> list[str]:
    """The lines `script` prints in a new interpreter, given a store path (`sys.argv[1]`)."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_opening_a_store_leaves_the_lancedb_rest_client_unloaded_until_used(tmp_path: Path) -> None:
    # `import lancedb` imports its REST namespace client, whose API modules (366 validated
    # methods) cost ~0.8 s of every new process: opening a store loads none of them, yet a
    # caller of that client gets all of it, with the same checks.
    unused, rejected, used = (line.split() for line in _probe(LANCEDB_IMPORT, tmp_path))
    assert unused == ["0", "0"]
    assert rejected == ["rejected", "id"]
    assert used == ["True", "True"]


MODELS_PROBE = textwrap.dedent(
    """
    import sys
    import pydantic
    from octobrain.store import MemoryStore

    MemoryStore(sys.argv[1], "hash:8", 8).count()
    from lance_namespace import DescribeTableRequest, DescribeTableResponse

    class Later(pydantic.BaseModel):
        n: int

    print(DescribeTableRequest.__pydantic_complete__, DescribeTableResponse.__pydantic_complete__)
    print(Later.__pydantic_complete__)
    try:
        DescribeTableRequest.model_validate({"id": 123})
    except pydantic.ValidationError as exc:
        print("rejected", exc.errors()[0]["loc"][0])
    print(DescribeTableRequest.model_validate({"id": ["a", "b"]}).id)
    """
)


def test_lancedbs_unused_models_are_built_when_first_used_not_when_imported(
    tmp_path: Path,
) -> None:
    # lancedb defines ~200 pydantic models as it imports (its REST namespace's requests and
    # responses, its embedding functions): a store opens without building their validators,
    # they validate as before once used, and models defined afterwards build as they are made.
    assert _probe(MODELS_PROBE, tmp_path) == ["False False", "True", "rejected id", "['a', 'b']"]


OVERRIDES_PROBE = textwrap.dedent(
    """
    import sys
    import overrides
    checker = sys.modules["overrides.overrides"]
    own, inspect_frame = overrides.override, checker._get_base_class_names
    inspected = []

    def counting(*args, **kwargs):
        inspected.append(1)
        return inspect_frame(*args, **kwargs)

    checker._get_base_class_names = counting
    from octobrain.store import MemoryStore

    MemoryStore(sys.argv[1], "hash:8", 8).count()
    from lancedb.db import LanceDBConnection

    print(len(inspected), overrides.override is own)
    print(LanceDBConnection.table_names.__override__, LanceDBConnection.open_table.__override__)

    class Base:
        def kept(self) -> int:
            return 1

    class Child(Base):
        @overrides.override
        def kept(self) -> int:
            return 2

    try:
        class Wrong(Base):
            @overrides.override
            def missing(self) -> int:
                return 3
    except (AssertionError, TypeError) as exc:
        print("refused", len(inspected) > 0)
    """
)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="lancedb uses typing.override there")
def test_opening_a_store_skips_the_overrides_bytecode_checks_and_restores_them(
    tmp_path: Path,
) -> None:
    # Before Python 3.12 lancedb marks overriding methods with `overrides.override`, which
    # disassembles the defining frame to check each one (~0.1 s of every new process). Opening
    # a store marks them as lancedb does on 3.12 (`typing.override`: a marker) and puts the
    # checking decorator back for everyone else.
    assert _probe(OVERRIDES_PROBE, tmp_path)[:3] == ["0 True", "True True", "refused True"]


@pytest.mark.parametrize("deferred", [False, True])
def test_maintenance_runs_within_the_write_or_after_it_when_deferred(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deferred: bool
) -> None:
    # The resident service defers it: the command whose write is the Nth commit gets its
    # answer first, and the service runs the pass afterwards, once.
    from octobrain.store import upkeep

    monkeypatch.setattr(upkeep, "COMPACT_EVERY", 2)
    monkeypatch.setattr(MemoryStore, "defer_maintenance", deferred)
    passes: list[int] = []
    monkeypatch.setattr(MemoryStore, "compact", lambda self: passes.append(self.version()))
    store = MemoryStore(tmp_path, "hash:8", DIM)
    for i, memory in enumerate(_memories(4)):
        store.add([memory], _vectors(1, seed=i))
    if not deferred:
        assert passes and not store.maintenance_due and not store.maintain_if_due()
        return
    assert passes == [] and store.maintenance_due
    assert store.maintain_if_due()
    assert len(passes) == 1 and not store.maintenance_due
    assert not store.maintain_if_due() and len(passes) == 1


def test_a_lance_error_is_reported_without_its_rust_source_location() -> None:
    # The startup sleep pass's warning printed "…, /root/.cargo/registry/src/…/lance-….rs:123:45".
    from octobrain.store.endpoint import object_store_reason

    exc = RuntimeError(
        "lance error: Not found: /data/db/relationships.lance/data/x.lance, "
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-0.38.2/src/local.rs:116:31"
    )
    assert object_store_reason(exc) == (
        "lance error: Not found: /data/db/relationships.lance/data/x.lance"
    )


@pytest.mark.parametrize(
    "text",
    [  # LanceDB's open, then octobrain's own request (obstore), with no keys in the environment
        'Invalid input, Failed to connect to namespace: IO { source: Generic { store: "N/A", '
        'source: IO { source: "Failed to get AWS credentials: ProviderError(ProviderError { '
        "source: FailedToLoadToken(FailedToLoadToken { source: ServiceError(ServiceError { "
        "source: TokenError { kind: Forbidden }, raw: Response { status: StatusCode(403) } }",
        "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in "
        "1.49ms - Server returned non-2xx status code: 403 Forbidden: resolve_deny: denied "
        'destination\n\nDebug source:\nGeneric {\n    store: "S3",\n}',
    ],
)
def test_a_bucket_without_credentials_is_said_so_in_a_few_words(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new machine without AWS keys: 'store: cannot open s3://…: Invalid input, Failed to
    # connect to namespace: IO { source: Generic { … 500 characters of a Rust dump …'.
    from octobrain.errors import StorageError
    from octobrain.store.endpoint import object_store_reason
    from octobrain.store.failures import io_failure

    monkeypatch.delenv("AWS_PROFILE", raising=False)
    said = (
        "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "
        "AWS_SESSION_TOKEN) in the environment, name a profile of ~/.aws/credentials in "
        "AWS_PROFILE, or run where an instance role provides them"
    )
    assert object_store_reason(RuntimeError(text)) == said
    # A write: no '(check that the endpoint is up and reachable …)' (it was never asked).
    assert io_failure("s3://team/api", RuntimeError(text)) == (
        f"store: cannot write to s3://team/api: {said}; nothing was changed"
    )
    # Nor in octobrain's own requests (the lease, the records).
    from obstore.exceptions import GenericError

    from octobrain.store.location import StoreLocation

    with (
        pytest.raises(StorageError) as raised,
        StoreLocation("s3://team/api").requesting("cannot read _octobrain/versions.json"),
    ):
        raise GenericError(text)
    assert str(raised.value) == (
        f"store: s3://team/api: cannot read _octobrain/versions.json ({said}); nothing was changed"
    )
