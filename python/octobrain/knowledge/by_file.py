"""`ByFile`: answers about local files kept while the file is as it was when read."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from octobrain.knowledge.sources import Fetched, SourceKind, SourceRef

_T = TypeVar("_T")


class ByFile(Generic[_T]):
    """Answers about local files, by what the file was when read (device, inode, size,
    modification and change times) and the settings that made the answer: asked again while
    the file is unchanged, the answer is given after a `stat` instead of reading the file
    again. At most `kept` answers of at most `budget` in all (bytes of memory, as `add` is
    told each answer's size), the oldest dropped.

    The change time is kept because the modification time can be set back (`cp -p`, `touch
    -r`, an archive's times) and the change time cannot be set back. A file changed less than
    `SETTLED_NS` before it was read is not kept: a timestamp moves in clock ticks (a few ms,
    a second or two on some filesystems), so a second write of the same size within the tick
    of the first leaves every time as it was."""

    SETTLED_NS = 2_000_000_000

    def __init__(self, kept: int, budget: int) -> None:
        self._kept, self._budget = kept, budget
        self._answers: OrderedDict[tuple[Any, ...], tuple[_T, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    @staticmethod
    def _key(ref: SourceRef, settings: tuple[Any, ...], st: os.stat_result) -> tuple[Any, ...]:
        times = (st.st_mtime_ns, st.st_ctime_ns)
        return (ref.uri, st.st_dev, st.st_ino, st.st_size, *times, *settings)

    def get(self, ref: SourceRef, settings: tuple[Any, ...]) -> _T | None:
        """The answer for `ref` as it is now, if it was given for the file as it is."""
        if ref.kind is not SourceKind.FILE or ref.path is None:
            return None
        try:
            st = os.stat(ref.path)
        except OSError:
            return None  # (the read says what is wrong)
        with self._lock:
            found = self._answers.get(self._key(ref, settings, st))
            if found is None:
                return None
            self._answers.move_to_end(self._key(ref, settings, st))
            return found[0]

    def add(self, fetched: Fetched, settings: tuple[Any, ...], answer: _T, size: int = 1) -> None:
        """Keep `answer` for the file `fetched` read (as it was then: `Fetched.stat`)."""
        if fetched.ref.kind is not SourceKind.FILE or fetched.stat is None or size > self._budget:
            return
        if time.time_ns() - fetched.stat.st_ctime_ns < self.SETTLED_NS:
            return  # just changed: may change again without a time moving
        key = self._key(fetched.ref, settings, fetched.stat)
        with self._lock:
            old = self._answers.pop(key, None)
            self._size += size - (old[1] if old is not None else 0)
            self._answers[key] = (answer, size)
            while len(self._answers) > self._kept or self._size > self._budget:
                _, (_, dropped) = self._answers.popitem(last=False)
                self._size -= dropped
