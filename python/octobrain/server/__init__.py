"""octobrain's MCP server: five tools (memorize, remember, forget, knowledge, ingest) over the
`Brain` facade, served over stdio or streamable HTTP. Named `server`, never `mcp`, so it cannot
shadow the SDK. Importing it does not load the model or LanceDB.
"""

from __future__ import annotations

from octobrain.server.app import OctobrainServer, build_server, serve_stdio
from octobrain.server.pool import BrainPool
from octobrain.server.scoping import ScopeLock, Workspace

__all__ = ["BrainPool", "OctobrainServer", "ScopeLock", "Workspace", "build_server", "serve_stdio"]
