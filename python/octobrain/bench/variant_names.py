"""The names of `bench locomo --variant`'s mechanisms (`locomo_variants`), in a module of their
own so that the command line lists them without importing the bench code behind them."""

from __future__ import annotations

__all__ = ["VARIANTS"]

VARIANTS = (
    "session-words",
    "window-vector",
    "decompose",
    "dense-feedback",
    "no-names",
    "word-neighbours",
)
