"""octobrain: long-term memory for AI agents, served over MCP.

The public Python API is what this module names in `__all__`; everything else is private by
convention (its paths may change between releases)::

    from octobrain import Brain, derive_scope

    brain = Brain(derive_scope())                  # the project of the working directory
    brain.memorize("Rate limits", "We throttle clients with a token bucket per API key.")
    best = brain.remember("how do we throttle clients").hits[0]
    best.memory.title, best.relevance              # ('Rate limits', 0.5…)

`Brain` is the facade the CLI, the MCP server and the benchmarks go through; `Knowledge` does
the same for external documents. Importing this package is cheap: each name is imported on
first use, and heavy dependencies (LanceDB, fastembed, onnxruntime) load when a store or an
embedder is first used, so the command-line launcher pays for none of them.
"""

from __future__ import annotations

_interrupts: list[int] = []  # Ctrl-Cs noted as the command line started (`_hold_interrupts`)


def _note_interrupt(signum: int, frame: object) -> None:
    _interrupts.append(signum)


def _hold_interrupts() -> None:
    """In the `octobrain` command's process (its script, or `python -m octobrain`), note a
    Ctrl-C rather than raise it until `cli.launch.main` takes it (`_release_interrupts`) and
    ends the command as click does ("Aborted!", exit 1). Raised as the launcher's modules were
    imported (its first ~30 ms), it printed a traceback of the import and the process died of
    the signal: 39 of 60 Ctrl-Cs sent 0-30 ms into `memory remember`. A program importing
    octobrain keeps the interpreter's handler; an ignored SIGINT stays ignored."""
    import os
    import sys

    script = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0]
    argv = list(getattr(sys, "orig_argv", []))
    module = argv[argv.index("-m") + 1 :][:1] if "-m" in argv else []
    if script != "octobrain" and module != ["octobrain"]:
        return
    # (built in: `signal` takes milliseconds to import, a window of its own; no stub)
    import _signal  # type: ignore[import-not-found]

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        try:
            _signal.signal(_signal.SIGINT, _note_interrupt)
        except ValueError:  # (imported off the main thread: its host's business)
            return


def _release_interrupts() -> bool:
    """The interpreter's Ctrl-C handler back, if `_hold_interrupts` replaced it; whether a
    Ctrl-C was noted meanwhile."""
    import _signal

    if _signal.getsignal(_signal.SIGINT) is _note_interrupt:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    return bool(_interrupts)


_hold_interrupts()  # first of all: a Ctrl-C as the command line starts is its own

from importlib import import_module  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

if TYPE_CHECKING:
    from octobrain.config import Config, load_config
    from octobrain.embed.base import Embedder
    from octobrain.embed.factory import get_embedder
    from octobrain.errors import (
        ConfigError,
        EmbeddingError,
        InvalidInput,
        OctobrainError,
        StorageError,
    )
    from octobrain.knowledge import Knowledge
    from octobrain.knowledge.extract import Document
    from octobrain.knowledge.results import (
        IndexReport,
        KnowledgeHit,
        KnowledgeStats,
        LineHit,
        MatchReport,
        SearchResult,
        SourceInfo,
        StoredNote,
    )
    from octobrain.memory.brain import Brain, Neighbour, Recall
    from octobrain.memory.consolidation import Consolidation, Unconsolidation
    from octobrain.memory.copies import Stored
    from octobrain.memory.edits import Edited
    from octobrain.memory.ingest import IngestReport
    from octobrain.memory.search import Empty, Hit
    from octobrain.memory.sleep import SleepReport
    from octobrain.memory.writes import Forgotten
    from octobrain.models import Memory, MemoryType, Relationship, RelationshipType, Source, State
    from octobrain.scope import derive_scope
    from octobrain.store.failures import ModelMismatch, NotFound
    from octobrain.store.timeline import StoreVersion

    __version__: str

# name -> the module that defines it
_PUBLIC = {
    "Brain": "octobrain.memory.brain",
    "Recall": "octobrain.memory.brain",
    "Neighbour": "octobrain.memory.brain",
    "Hit": "octobrain.memory.search",
    "Knowledge": "octobrain.knowledge",
    "Memory": "octobrain.models",
    "MemoryType": "octobrain.models",
    "Relationship": "octobrain.models",
    "RelationshipType": "octobrain.models",
    "Source": "octobrain.models",
    "State": "octobrain.models",
    "Config": "octobrain.config",
    "load_config": "octobrain.config",
    "derive_scope": "octobrain.scope",
    "Embedder": "octobrain.embed.base",
    "get_embedder": "octobrain.embed.factory",
    "OctobrainError": "octobrain.errors",
    "InvalidInput": "octobrain.errors",
    "ConfigError": "octobrain.errors",
    "EmbeddingError": "octobrain.errors",
    "StorageError": "octobrain.errors",
    # What the methods of `Brain` and `Knowledge` return, and the errors below `InvalidInput`
    # and `OctobrainError` they raise, for annotating a caller's code.
    "Stored": "octobrain.memory.copies",
    "Forgotten": "octobrain.memory.writes",
    "Edited": "octobrain.memory.edits",
    "IngestReport": "octobrain.memory.ingest",
    "SleepReport": "octobrain.memory.sleep",
    "Consolidation": "octobrain.memory.consolidation",
    "Unconsolidation": "octobrain.memory.consolidation",
    "StoreVersion": "octobrain.store.timeline",
    "Empty": "octobrain.memory.search",
    "Document": "octobrain.knowledge.extract",
    "IndexReport": "octobrain.knowledge.results",
    "SearchResult": "octobrain.knowledge.results",
    "KnowledgeHit": "octobrain.knowledge.results",
    "MatchReport": "octobrain.knowledge.results",
    "LineHit": "octobrain.knowledge.results",
    "StoredNote": "octobrain.knowledge.results",
    "SourceInfo": "octobrain.knowledge.results",
    "KnowledgeStats": "octobrain.knowledge.results",
    "NotFound": "octobrain.store.failures",
    "ModelMismatch": "octobrain.store.failures",
}

__all__ = [
    "Brain",
    "Config",
    "ConfigError",
    "Consolidation",
    "Document",
    "Edited",
    "Embedder",
    "EmbeddingError",
    "Empty",
    "Forgotten",
    "Hit",
    "IndexReport",
    "IngestReport",
    "InvalidInput",
    "Knowledge",
    "KnowledgeHit",
    "KnowledgeStats",
    "LineHit",
    "MatchReport",
    "Memory",
    "MemoryType",
    "ModelMismatch",
    "Neighbour",
    "NotFound",
    "OctobrainError",
    "Recall",
    "Relationship",
    "RelationshipType",
    "SearchResult",
    "SleepReport",
    "Source",
    "SourceInfo",
    "State",
    "StorageError",
    "StoreVersion",
    "Stored",
    "StoredNote",
    "Unconsolidation",
    "__version__",
    "derive_scope",
    "get_embedder",
    "load_config",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found: Any = version("octobrain")
        except PackageNotFoundError:  # running from a source tree that was never installed
            from octobrain._core import __version__ as found
    elif name in _PUBLIC:
        found = getattr(import_module(_PUBLIC[name]), name)
    else:
        raise AttributeError(f"module 'octobrain' has no attribute {name!r}")
    globals()[name] = found
    return found


def __dir__() -> list[str]:
    return __all__
