"""octobrain's MCP server: five tools (memorize, remember, forget, knowledge, ingest) over the
`Brain` facade, served over stdio or streamable HTTP. Named `server`, never `mcp`, so it cannot
shadow the SDK. Importing it does not load the model or LanceDB, nor the MCP SDK until a name
that needs it is asked for: the resident service imports `server.pool` as it loads, and the
SDK took 0.8 s of that load (2.3 s on a busy 2-core machine) that the commands sent to a
loading service waited for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from octobrain.server.app import OctobrainServer, build_server, serve_stdio
    from octobrain.server.pool import BrainPool
    from octobrain.server.scoping import ScopeLock, Workspace

__all__ = ["BrainPool", "OctobrainServer", "ScopeLock", "Workspace", "build_server", "serve_stdio"]

_WHERE = {"OctobrainServer": "app", "build_server": "app", "serve_stdio": "app",
          "BrainPool": "pool", "ScopeLock": "scoping", "Workspace": "scoping"}  # fmt: skip


def __getattr__(name: str) -> Any:
    """The names above, each imported from its module when first asked for (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
