"""`reopening`: a knowledge call run once more when another process started the knowledge
tables over under it, its progress shown once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast

from octobrain.errors import StorageError
from octobrain.knowledge.generation import Progress
from octobrain.knowledge.index import ChunkIndex
from octobrain.knowledge.store import KnowledgeStore

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Reopens(Protocol):
    """What `reopening` reads and resets of the object whose method it runs (`Knowledge`)."""

    _store: KnowledgeStore | None
    _index: ChunkIndex | None


_S = TypeVar("_S", bound=_Reopens)


def reopening(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """Run `method` once more when it failed because another process started the knowledge
    tables over (`doctor --recreate knowledge`) while this one held them open (an MCP server
    open all day): its handles pointed at tables that were gone, and every call failed."""

    @functools.wraps(method)
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        progress = kwargs.get("progress")
        if progress is not None:  # the run again repeats the batches already shown
            kwargs["progress"] = _Ahead(cast(Progress, progress))
        try:
            return method(self, *args, **kwargs)
        except (OSError, RuntimeError, StorageError):
            if self._store is None or not self._store.started_over():
                raise
            if self._index is not None:  # its catch-up read the tables that are gone (emptied
                self._index.clear()  # in place: other facades may share it)
        return method(self, *args, **kwargs)

    return run


class _Ahead:
    """A progress callback passing on only work past what it has already reported: a call run
    again by `reopening` embeds its batches again, and a bar that went back to the start (or
    ran on past its length) would show the work twice."""

    def __init__(self, report: Progress) -> None:
        self.report = report
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        if done > self.done:
            self.done = done
            self.report(done, total)
