"""URLs fetched apart from the knowledge lock, for the MCP server.

The server runs knowledge calls one at a time (`BrainPool.call_knowledge`). A fetch inside one
waited on someone else's web server for up to `knowledge.fetch_timeout_secs`, and every other
client's knowledge call waited with it, a read of its own session note too; a client naming
slow URLs one after another held them for as long as it liked. So a facade given a
`prefetched` map never fetches: a call needing a URL not in it stops with `FetchFirst` before
it has changed anything, the server fetches the URL holding no lock (`FetchFirst.fetch`), and
runs the call again with the answer in the map. The CLI leaves the map out and fetches inline.
"""

from __future__ import annotations

from collections.abc import Callable

from octobrain.knowledge.sources import Fetched, SourceRef


class FetchFirst(Exception):
    """A call needs `ref` fetched first: `fetch()` gets it (blocking; no lock needed)."""

    def __init__(self, ref: SourceRef, fetch: Callable[[], Fetched]) -> None:
        super().__init__(f"fetch {ref.uri} first")
        self.ref = ref
        self.fetch = fetch
