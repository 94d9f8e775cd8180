"""`Brain`: the one facade the CLI, the MCP server, benchmarks and tests go through.

A Brain is bound to a scope. It validates input (errors name the field and the rule), embeds,
writes through the store with the scope rule (rows keep their own scope forever), and runs the
hybrid retrieval pipeline. Heavy objects (LanceDB, the model) load on first use.
"""

from __future__ import annotations

from octobrain.memory.curation import Curation
from octobrain.memory.reads import ACCESS_WINDOW, Neighbour, Reads, Recall
from octobrain.memory.writes import Writes

__all__ = ["ACCESS_WINDOW", "Brain", "Neighbour", "Recall"]


class Brain(Writes, Reads, Curation):
    """Memories of one scope (plus the global ones it can see).

    One class in four files: the write path (`memory.writes`), the read path (`memory.reads`)
    and curation (`memory.curation`), over the shared state and checks of `memory.core`.
    """
