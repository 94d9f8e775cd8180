"""octobrain: long-term memory for AI agents, served over MCP.

Importing this package is cheap: the compiled core is small, and heavy dependencies
(LanceDB, fastembed, onnxruntime) load lazily when a store or an embedder is first used.
`__version__` is looked up on first use, so the command-line launcher that talks to the
resident service does not pay for `importlib.metadata`.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module 'octobrain' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("octobrain")
    except PackageNotFoundError:  # running from a source tree that was never installed
        from octobrain._core import __version__ as found
    globals()["__version__"] = found
    return found
