"""How every octobrain path imports `lancedb`: once, under a lock, with the packages a local or
object-store location never calls left unexecuted (`_LazyPackage`: the REST namespace client,
its models package, lancedb's embedding functions and rerankers) and pydantic's validator
builds deferred, so a new process does not pay for them.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_IMPORTING = threading.Lock()
_RUNNING = threading.Lock()

_REST_CLIENT = "lance_namespace_urllib3_client"  # lancedb's REST namespace client
_EMBEDDINGS = "lancedb.embeddings"
# Parents before their children. During lancedb's import a name lancedb reads from one of these
# (`from lancedb.embeddings import EmbeddingFunctionConfig`) comes from the module its `__init__`
# takes it from, so that `__init__` and every module it alone imports stay unexecuted.
_DEFERRED = (
    _REST_CLIENT,  # its API modules: 366 validated methods
    f"{_REST_CLIENT}.models",  # every request and response model; lance_namespace needs most
    _EMBEDDINGS,  # 16 embedding-function modules (OpenAI, CLIP, ...); lancedb needs the base
    "lancedb.rerankers",  # 12 rerankers; lancedb imports the base and RRF by module
)
_SOURCES: dict[str, dict[str, tuple[str, str]]] = {}  # package → name → (module, name there)
_importer: int | None = None  # the thread importing lancedb, while it does


class _LazyPackage(ModuleType):
    """A package whose `__init__` runs when one of its own names is first read.

    Its submodules import as usual (the package's `__path__` is set from the start), and
    reading a name the package does not have yet (`package.ApiClient`, a `from package import
    ApiClient`) runs the real `__init__` once, in this module, then answers. A name bound by a
    submodule's import (`package.models`) is there without it. While lancedb imports, a name
    the `__init__` only re-exports is answered from its own module instead (not kept here).
    """

    @classmethod
    def register(cls, name: str) -> None:
        """Put `name` in `sys.modules` unexecuted, unless it is imported or not installed."""
        if name in sys.modules:
            return
        spec = _spec_unimported(name)
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
        if threading.get_ident() == _importer and self.__spec__ is not None:
            sources = _SOURCES.get(self.__name__)
            if sources is None:
                sources = _SOURCES[self.__name__] = _reexports(self.__spec__)
            if attr in sources:
                module, name = sources[attr]
                return getattr(importlib.import_module(module), name)
        self.run()
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}") from None

    def run(self) -> None:
        """Run the package's `__init__`, once, unless it has run."""
        with _RUNNING:
            if type(self) is not _LazyPackage:
                return
            loader = self.__spec__.loader if self.__spec__ is not None else None
            assert loader is not None  # `register` set it
            object.__setattr__(self, "__class__", ModuleType)
            try:
                loader.exec_module(self)
            except BaseException:
                sys.modules.pop(self.__name__, None)  # the next import starts afresh
                raise


def _spec_unimported(name: str) -> ModuleSpec | None:
    """`name`'s spec, found without importing its parent packages (`lancedb` for
    `lancedb.embeddings`), the way the import system finds it."""
    parent = name.rpartition(".")[0]
    if not parent or parent in sys.modules:
        return importlib.util.find_spec(name)
    parent_spec = _spec_unimported(parent)
    path = parent_spec.submodule_search_locations if parent_spec is not None else None
    if path is None:
        return None
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec: ModuleSpec | None = find(name, path) if find is not None else None
        if spec is not None:
            return spec
    return None


def _reexports(spec: ModuleSpec) -> dict[str, tuple[str, str]]:
    """`name → (module, its name there)` for an `__init__` that only re-exports names
    (`from .base import Reranker`, a docstring, `__all__`); nothing for any other."""
    get_source = getattr(spec.loader, "get_source", None)
    try:
        source = get_source(spec.name) if get_source is not None else None
        body = ast.parse(source).body if source is not None else []
    except (ImportError, OSError, SyntaxError, ValueError):
        return {}
    sources: dict[str, tuple[str, str]] = {}
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            module = importlib.util.resolve_name("." * node.level + node.module, spec.name)
            for alias in node.names:
                if alias.name == "*":
                    return {}
                sources[alias.asname or alias.name] = (module, alias.name)
        elif not _inert(node):
            return {}
    return sources


def _inert(node: ast.stmt) -> bool:
    """A docstring or an `__all__ = ...`: nothing a name read from the package depends on."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    return isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
        "__all__"
    ]


class _RegisteredOnLookup(dict[str, Any]):
    """lancedb's embedding-function registry (`name → class`). Each function registers itself
    as `lancedb.embeddings` imports it, so a name looked up and missing runs that package first:
    a table whose schema names its embedding function opens as before."""

    def __missing__(self, key: str) -> Any:
        package = sys.modules.get(_EMBEDDINGS)
        if isinstance(package, _LazyPackage):
            package.run()
        if key in self:
            return dict.__getitem__(self, key)
        raise KeyError(key)


def _registry_runs_embeddings() -> None:
    """After lancedb's import: its embedding-function registry runs `lancedb.embeddings` on
    first lookup of a name it lacks; where it cannot (another lancedb), the package runs now."""
    package = sys.modules.get(_EMBEDDINGS)
    if not isinstance(package, _LazyPackage):
        return
    registry = getattr(
        sys.modules.get(f"{_EMBEDDINGS}.registry"), "EmbeddingFunctionRegistry", None
    )
    instance: Any = getattr(registry, "get_instance", lambda: None)()
    functions = getattr(instance, "_functions", None)
    if type(functions) is dict:
        instance._functions = _RegisteredOnLookup(functions)
    else:
        package.run()


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
    gets it whole. The same holds for the other packages in `_DEFERRED` (the REST models
    nothing imports, lancedb's embedding functions and rerankers): the few names lancedb
    reads from them as it imports are each answered from the module that defines it, and
    lancedb's embedding-function registry runs `lancedb.embeddings` when it is asked for a
    function it lacks (a table whose schema names one). Before Python 3.12 lancedb marks its
    overriding methods with the `overrides` package's `@override`, which disassembles the
    calling frame's bytecode to check each one against its base class (about 0.1 s); from 3.12
    it uses `typing.override`, a marker, and during the import it gets that marker on 3.11
    too, put back after. LanceDB's own log (index training notes, skipped partitions) is not
    actionable for a user and would interleave with the CLI's output; `LANCEDB_LOG=warn`
    brings it back.
    """
    global _importer
    os.environ.setdefault("LANCEDB_LOG", "error")
    loaded = sys.modules.get("lancedb")
    if loaded is not None:
        return loaded
    with _IMPORTING:
        for name in _DEFERRED:
            _LazyPackage.register(name)
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
        _importer = threading.get_ident()
        try:
            with _pydantic_builds_deferred():
                import lancedb
        finally:
            _importer = None
            for module, name, value in saved:
                setattr(module, name, value)
        _registry_runs_embeddings()
    return lancedb


@contextlib.contextmanager
def _pydantic_builds_deferred() -> Iterator[None]:
    """Within: a pydantic model class that does not say otherwise builds its validator when
    first used rather than when defined. The ~170 models lancedb defines as it imports (the
    REST namespace's requests and responses) are never used by a local or object-store
    location, and building them (and the embedding functions', now left unimported) cost
    about 60 ms of every new process.
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
