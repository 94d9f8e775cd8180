"""`store.lancedb_import.import_lancedb`: lancedb's parts a local store never calls stay
unexecuted until something reads them, and then behave as before; LanceDB's log stays quiet."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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


DEFERRED_PROBE = textwrap.dedent(
    """
    import sys
    from octobrain.store import MemoryStore

    MemoryStore(sys.argv[1], "hash:8", 8).count()
    unused = ["lancedb.embeddings.openai", "lancedb.rerankers.cohere",
              "lance_namespace_urllib3_client.models.partition_spec"]
    print(*(name in sys.modules for name in unused))
    from lancedb.embeddings import get_registry
    from lancedb.rerankers import CohereReranker
    from lance_namespace_urllib3_client.models import ErrorResponse

    print(get_registry().get("openai").__name__, CohereReranker.__name__)
    print(ErrorResponse.model_validate({"code": 404}).code)
    print(*(name in sys.modules for name in unused))
    """
)


def test_opening_a_store_leaves_lancedbs_embeddings_rerankers_and_unused_models_unloaded(
    tmp_path: Path,
) -> None:
    # lancedb's embedding functions and rerankers (a local store computes neither) and the
    # REST models nothing imports are left unexecuted; a name read from their package later
    # runs it whole, as `import lancedb` did: the registry knows its functions.
    assert _probe(DEFERRED_PROBE, tmp_path) == [
        "False False False",
        "OpenAIEmbeddings CohereReranker",
        "404",
        "True True True",
    ]


EMBEDDED_TABLE_PROBE = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    from octobrain.store import MemoryStore
    from octobrain.store.location import StoreLocation

    MemoryStore(sys.argv[1], "hash:8", 8).count()
    named = [{"name": "openai", "model": {"name": "text-embedding-3-small"},
              "source_column": "text", "vector_column": "vector"}]
    fields = [pa.field("text", pa.string()), pa.field("vector", pa.list_(pa.float32(), 4))]
    schema = pa.schema(fields, metadata={"embedding_functions": json.dumps(named)})
    StoreLocation(sys.argv[1] + "-other").connect().create_table("t", schema=schema)
    table = StoreLocation(sys.argv[1] + "-other").connect().open_table("t")
    print(type(table.embedding_functions["vector"].function).__name__)
    """
)


def test_a_table_naming_its_embedding_function_opens_with_it(tmp_path: Path) -> None:
    # lancedb finds a table's embedding function by name in a registry each function joins as
    # `lancedb.embeddings` imports it: a lookup there runs that package, left unexecuted.
    assert _probe(EMBEDDED_TABLE_PROBE, tmp_path) == ["OpenAIEmbeddings"]
