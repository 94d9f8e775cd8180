"""How every octobrain path imports `lancedb`: once, under a lock, with the REST namespace
client's package left unexecuted (`_LazyPackage`) and pydantic's validator builds deferred,
so a new process does not pay for the parts a local or object-store location never calls.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_IMPORTING = threading.Lock()


_REST_CLIENT = "lance_namespace_urllib3_client"  # lancedb's REST namespace client


class _LazyPackage(ModuleType):
    """A package whose `__init__` runs when one of its own names is first read.

    Its submodules import as usual (the package's `__path__` is set from the start), and
    reading a name the package does not have yet (`package.ApiClient`, a `from package import
    ApiClient`) runs the real `__init__` once, in this module, then answers. A name bound by a
    submodule's import (`package.models`) is there without it.
    """

    @classmethod
    def register(cls, name: str) -> None:
        """Put `name` in `sys.modules` unexecuted, unless it is imported or not installed."""
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = cls(name)
        module.__spec__ = spec
        module.__loader__ = spec.loader
        module.__file__ = spec.origin
        module.__path__ = list(spec.submodule_search_locations)
        module.__package__ = name
        sys.modules[name] = module

    def __getattr__(self, attr: str) -> Any:
        with _IMPORTING_REST:
            if type(self) is _LazyPackage:  # not run yet: run it once, under the lock
                loader = self.__spec__.loader if self.__spec__ is not None else None
                assert loader is not None  # `register` set it
                object.__setattr__(self, "__class__", ModuleType)
                try:
                    loader.exec_module(self)
                except BaseException:
                    sys.modules.pop(self.__name__, None)  # the next import starts afresh
                    raise
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}") from None


_IMPORTING_REST = threading.Lock()


def _override_marker(method: Any = None, /, **_options: Any) -> Any:
    """What lancedb decorates with on Python 3.12+ (`typing.override`): marks, checks nothing."""

    def mark(func: Any) -> Any:
        with contextlib.suppress(AttributeError, TypeError):  # a builtin or slotted object
            func.__override__ = True  # what `overrides.EnforceOverrides` looks for
        return func

    return mark if method is None else mark(method)


def import_lancedb() -> ModuleType:
    """`lancedb`, imported the way every octobrain path imports it (call before any
    `from lancedb… import`).

    `import lancedb` imports its REST namespace client package, whose `__init__` imports all of
    its API modules: 366 methods (lancedb 0.40) wrapped in pydantic's `validate_call`, each
    validator built at import, about 0.8 s of a new process's start on a 2-core machine, for a
    client a local or object-store location never calls. lancedb itself needs only the
    package's request and response models, which it imports by their own modules. So during
    the import that package is registered unexecuted (`_LazyPackage`): its submodules import
    as usual, and its `__init__` runs, unchanged, the first time anything reads one of its own
    names (`from lance_namespace_urllib3_client import ApiClient`), so a caller of that client
    gets it whole. Before Python 3.12 lancedb marks its overriding methods with the
    `overrides` package's `@override`, which disassembles the calling frame's bytecode to check
    each one against its base class (about 0.1 s); from 3.12 it uses `typing.override`, a
    marker, and during the import it gets that marker on 3.11 too, put back after.
    LanceDB's own log (index training notes, skipped partitions) is not actionable for a user
    and would interleave with the CLI's output; `LANCEDB_LOG=warn` brings it back.
    """
    os.environ.setdefault("LANCEDB_LOG", "error")
    loaded = sys.modules.get("lancedb")
    if loaded is not None:
        return loaded
    with _IMPORTING:
        _LazyPackage.register(_REST_CLIENT)
        swaps: list[tuple[ModuleType, str, Any]] = []
        if sys.version_info < (3, 12):
            try:
                import overrides
            except ImportError:  # lancedb then fails its own import, with its own message
                pass
            else:
                swaps.append((overrides, "override", _override_marker))
        saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
        for module, name, value in swaps:
            setattr(module, name, value)
        try:
            with _pydantic_builds_deferred():
                import lancedb
        finally:
            for module, name, value in saved:
                setattr(module, name, value)
    return lancedb


@contextlib.contextmanager
def _pydantic_builds_deferred() -> Iterator[None]:
    """Within: a pydantic model class that does not say otherwise builds its validator when
    first used rather than when defined. The ~200 models lancedb defines as it imports (the
    REST namespace's requests and responses, the embedding functions) are never used by a
    local or object-store location, and building them cost about 60 ms of every new process.
    pydantic reads its config defaults when a class is made (`_config.config_defaults`, a
    private name: without it nothing changes); the default is put back after."""
    try:
        from pydantic._internal import _config
    except ImportError:
        yield
        return
    defaults = getattr(_config, "config_defaults", None)
    if not isinstance(defaults, dict) or defaults.get("defer_build") is not False:
        yield
        return
    defaults["defer_build"] = True
    try:
        yield
    finally:
        defaults["defer_build"] = False


def lancedb_loop() -> Any:
    """The event loop lancedb's sync API runs every call on (to hand it several at once)."""
    import_lancedb()
    from lancedb.background_loop import LOOP

    return LOOP
