"""`close()` and `with` for a facade over a store (`Brain`, `Knowledge`): what it holds let go
of at a point the caller chooses, and every later call refused in one line rather than the
store quietly opened again behind a closed object's back."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

from octobrain.errors import InvalidInput

_C = TypeVar("_C", bound="Closable")


class Closable:
    """A facade that can be closed: `close()` (idempotent) runs `_let_go` once; `with` closes
    it at the end of its block. Its parts check `_check_open` before they open anything."""

    _closed = False

    def _let_go(self) -> None:
        """Commit what is pending, wait for background work, drop the store's handles."""

    def close(self) -> None:
        """Commit what is pending, finish background work and let go of the store's handles
        now; later calls are refused (`InvalidInput`). Closing again does nothing."""
        if self._closed:
            return
        try:
            self._let_go()
        finally:
            self._closed = True

    @property
    def closed(self) -> bool:
        """Whether `close()` has run (or the `with` block ended)."""
        return self._closed

    def _check_open(self) -> None:
        """`InvalidInput` naming the class once it is closed."""
        if self._closed:
            name = type(self).__name__
            raise InvalidInput(
                name,
                f"this {name} is closed (its close() ran, or its `with` block ended); "
                f"make a new {name} to go on",
            )

    def __enter__(self: _C) -> _C:
        self._check_open()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
