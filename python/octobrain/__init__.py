"""octobrain: long-term memory for AI agents, served over MCP.

Importing this package is cheap: the compiled core is small, and heavy dependencies
(LanceDB, fastembed, onnxruntime) load lazily when a store or an embedder is first used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("octobrain")
except PackageNotFoundError:  # running from a source tree that was never installed
    from octobrain._core import __version__

__all__ = ["__version__"]
