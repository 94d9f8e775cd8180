"""`Brain`: the one facade the CLI, the MCP server, benchmarks and tests go through.

A Brain is bound to a scope. It validates input (errors name the field and the rule), embeds,
writes through the store with the scope rule (rows keep their own scope forever), and runs the
hybrid retrieval pipeline. Heavy objects (LanceDB, the model) load on first use.
"""

from __future__ import annotations

from octobrain.memory.curation import Curation
from octobrain.memory.edits import Edits
from octobrain.memory.reads import ACCESS_WINDOW, Neighbour, Reads, Recall
from octobrain.memory.writes import Writes
from octobrain.store.failures import failures_named

__all__ = ["ACCESS_WINDOW", "Brain", "Neighbour", "Recall"]


@failures_named
class Brain(Writes, Edits, Reads, Curation):
    """Memories of one scope (plus the global ones it can see).

    `Brain(scope, *, config=None, embedder=None, uri=None, workdir=None, session_id="")`:
    `scope` as `derive_scope()` gives it ("" is global); `config` a `Config` (None:
    `load_config()`, the file and `OCTOBRAIN_*` variables); `embedder` an `Embedder` (None: the
    one the config names; `get_embedder("hash:256")` for tests); `uri` the store's folder or
    object-store URI (None: the config's, under the data dir); `workdir` the git checkout whose
    HEAD commit is recorded on new memories; `session_id` links what this Brain memorizes to
    its session's earlier memories. A wrong argument is `InvalidInput` naming it.

    Nothing opens until first used; the store and model stay open while the Brain lives and
    need no closing (access counts are committed within a second, and as the process exits:
    `flush()` commits them now). `close()`, or the end of a `with Brain(...) as brain:` block,
    lets go at once: the access counts queued committed, background work finished, the
    store's handles dropped (the model stays, shared by the process); later calls are refused
    (`InvalidInput`: is closed). A Brain made by `for_scope` shares the store, closed apart.
    Brains of one store may be used at once, from threads and processes; a process forked
    from one that had opened a store opens none (`StorageError`: start it with 'spawn' or
    'forkserver'). Failures are `OctobrainError`s: `InvalidInput` (a
    `ValueError`) for an argument or an id not visible from the scope, `StorageError` when the
    store cannot be opened, read or written, `EmbeddingError` when the model cannot load or
    answer, and the base class itself for a store embedded with another model.

    One class in five files: the write path (`memory.writes`), edits (`memory.edits`), the read
    path (`memory.reads`) and curation (`memory.curation`), over the shared state and checks of
    `memory.core`.
    """
