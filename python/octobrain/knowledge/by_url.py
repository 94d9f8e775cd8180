"""`ByUrl`: answers about URLs kept for a few minutes after the fetch that made them."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from octobrain.knowledge.sources import Fetched, SourceKind, SourceRef

_T = TypeVar("_T")


class ByUrl(Generic[_T]):
    """Answers about URLs, by the URL and the settings that made the answer, for `seconds`
    after the fetch: `knowledge read` pages through a web page a call a page, and each page
    fetched the URL again (20 pages, 20 requests to someone else's server, and pages cut from
    as many copies of a page that may change between them). Asked again within `seconds` of
    the fetch, the answer is the one that fetch made; later, nothing (the caller fetches
    again): reading a page an hour later shows what it says then. At most `kept` answers of at
    most `budget` in all (bytes of memory, as `add` is told each answer's size), the oldest
    dropped; an answer past its time is dropped when any is asked for or added."""

    def __init__(self, kept: int, budget: int, seconds: float) -> None:
        self._kept, self._budget, self._seconds = kept, budget, seconds
        # key -> (answer, size, when fetched by time.monotonic), oldest first
        self._answers: OrderedDict[tuple[Any, ...], tuple[_T, int, float]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        """Drop the answers older than `seconds` (hold the lock); they are oldest first."""
        while self._answers:
            key, (_, size, when) = next(iter(self._answers.items()))
            if now - when <= self._seconds:
                return
            del self._answers[key]
            self._size -= size

    def get(self, ref: SourceRef, settings: tuple[Any, ...]) -> _T | None:
        """The answer for the URL `ref` fetched less than `seconds` ago with `settings`."""
        if ref.kind is not SourceKind.URL:
            return None
        with self._lock:
            self._expire(time.monotonic())
            found = self._answers.get((ref.uri, *settings))
            return found[0] if found is not None else None

    def add(self, fetched: Fetched, settings: tuple[Any, ...], answer: _T, size: int = 1) -> None:
        """Keep `answer` for the URL `fetched` read, from now (call it right after the fetch)."""
        if fetched.ref.kind is not SourceKind.URL or size > self._budget:
            return
        now = time.monotonic()
        key = (fetched.ref.uri, *settings)
        with self._lock:
            old = self._answers.pop(key, None)
            self._size += size - (old[1] if old is not None else 0)
            self._answers[key] = (answer, size, now)  # the newest: kept in fetch order
            self._expire(now)
            while len(self._answers) > self._kept or self._size > self._budget:
                _, (_, dropped, _) = self._answers.popitem(last=False)
                self._size -= dropped
