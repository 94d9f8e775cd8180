"""Where the config and the data live, how the file and the environment become a `Config`,
and how a `Config` is written back as TOML.

Precedence: defaults < the file < `OCTOBRAIN_<SECTION>_<KEY>` environment variables. A missing
file or a partial file is valid; unknown keys are logged as warnings (never fatal, so a config
written for a newer version still loads); a bad value is a `ConfigError` naming the file (or
the env var), the dotted key and the rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import tomllib
import typing
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from octobrain.config.schema import CONFIG_VERSION, Config
from octobrain.errors import ConfigError, as_json, json_printable
from octobrain.files import NotARegularFile, TooLarge, check_path, read_regular
from octobrain.safe_text import is_unicode

# The name users and tests filter on: the package, not this module.
log = logging.getLogger("octobrain.config")

# ---- locations ---------------------------------------------------------------------------


def _local_path(raw: str, key: str, source: str | None = None) -> Path:
    """`raw` as a local path with `~` expanded, or a `ConfigError` naming `key` (an env var or a
    config key) when it holds a NUL or names a home directory that does not exist."""
    if "\x00" in raw:
        raise ConfigError(key, "must not contain NUL characters", source)
    try:  # bytes that are not UTF-8 arrive as lone surrogates; the store's keys are UTF-8
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(key, "must be valid UTF-8 (rename the directory)", source) from None
    try:
        path = Path(raw).expanduser()
    except RuntimeError:  # `~user` of no such user, or no home directory at all
        raise ConfigError(key, f"{as_json(raw)}: its ~ names no home directory", source) from None
    if not path.is_absolute():  # (read from each command's directory: a store in each)
        raise ConfigError(
            key,
            f"must be an absolute path (or start with ~), got {as_json(raw)}: a relative one names "
            "another place in every directory a command runs from",
            source,
        )
    return path


MAX_CONFIG_BYTES = 1 << 20  # a config file is a few kB
_IPV6_FIRST = re.compile(r"\[[0-9A-Fa-f.]*:")


def data_dir() -> Path:
    """Data root: `$OCTOBRAIN_DATA_DIR`, else the platform's user data dir. Not created here."""
    env = os.environ.get("OCTOBRAIN_DATA_DIR", "").strip()
    if env:
        return _local_path(env, "OCTOBRAIN_DATA_DIR")
    import platformdirs  # lazy: only needed when no override is set

    return Path(platformdirs.user_data_dir("octobrain", appauthor=False))


def config_path() -> Path:
    """Config file: `$OCTOBRAIN_CONFIG_PATH`, else `<data root>/config.toml`."""
    env = os.environ.get("OCTOBRAIN_CONFIG_PATH", "").strip()
    return _local_path(env, "OCTOBRAIN_CONFIG_PATH") if env else data_dir() / "config.toml"


def storage_options(config: Config) -> dict[str, str]:
    """`storage.options` as a dict (validated at load: every entry is key=value)."""
    return dict(
        (key.strip(), value.strip())
        for key, _, value in (item.partition("=") for item in config.storage.options)
    )


def resolve_storage_uri(config: Config) -> str:
    """The store location: `storage.uri`, or `<data root>/db` when empty."""
    uri = config.storage.uri
    if not uri:
        return str(data_dir() / "db")
    return uri if "://" in uri else str(_local_path(uri, "storage.uri"))


# ---- loading -----------------------------------------------------------------------------


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _leaves(cls: type, prefix: str = "") -> list[tuple[str, Any, dataclasses.Field[Any]]]:
    """Every leaf key as (dotted name, type, field), in declaration order."""
    out: list[tuple[str, Any, dataclasses.Field[Any]]] = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        typ = hints[f.name]
        if dataclasses.is_dataclass(typ):
            out.extend(_leaves(typ, f"{prefix}{f.name}."))  # type: ignore[arg-type]
        else:
            out.append((f"{prefix}{f.name}", typ, f))
    return out


def env_var_for(dotted_key: str) -> str:
    """The env var overriding a key: `search.hyde.alpha` -> `OCTOBRAIN_SEARCH_HYDE_ALPHA`."""
    return "OCTOBRAIN_" + dotted_key.upper().replace(".", "_")


# OCTOBRAIN_* variables that are read but are not settings.
OTHER_ENV = frozenset(
    {
        "OCTOBRAIN_DATA_DIR",
        "OCTOBRAIN_CONFIG_PATH",
        "OCTOBRAIN_SCIFACT",
        "OCTOBRAIN_LOCOMO",
        "OCTOBRAIN_TOKEN",
    }
)


def ignored_env(names: Iterable[str]) -> list[str]:
    """The `OCTOBRAIN_*` names among `names` that octobrain never reads (a misspelt setting
    would otherwise change nothing, silently)."""
    known = {env_var_for(dotted) for dotted, _, _ in _leaves(Config)} | OTHER_ENV
    return sorted(n for n in names if n.startswith("OCTOBRAIN_") and n not in known)


def _coerce(value: Any, typ: Any) -> tuple[Any, str | None]:
    """Check a TOML value against a field type; return (value, problem)."""
    if typ is bool:
        return value, None if isinstance(value, bool) else "must be true or false"
    if typ is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return value, None if ok else "must be an integer"
    if typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(value), None
            except OverflowError:  # (an integer of 309 digits or more: no float holds it)
                return value, "must be a finite number"
        return value, "must be a number"
    if typ is str:
        return value, None if isinstance(value, str) else "must be a string"
    if typing.get_origin(typ) is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value), None
        return value, "must be a list of strings"
    raise TypeError(f"unsupported config type {typ!r}")  # a bug in this module, not user input


def _parse_env(raw: str, typ: Any) -> tuple[Any, str | None]:
    """Parse an env var's text into a field type; return (value, problem)."""
    if not is_unicode(raw):  # (bytes that are not UTF-8 arrive as lone surrogates)
        return raw, "must be valid UTF-8"
    text = raw.strip()
    if typ is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True, None
        if low in ("0", "false", "no", "off"):
            return False, None
        return raw, "must be one of 1, 0, true, false, yes, no, on, off"
    if typ is int:
        try:
            return int(text), None
        except ValueError:
            return raw, "must be an integer"
    if typ is float:
        try:
            return float(text), None
        except ValueError:
            return raw, "must be a number"
    if typing.get_origin(typ) is tuple:
        # As the config file writes it: ["127.0.0.1", "10.0.0.0/8"]; not "[::1]:8000,…", an
        # IPv6 address in brackets (a hex digit or a colon, then a colon, before any quote).
        if text.startswith("[") and not _IPV6_FIRST.match(text):
            try:
                items = tomllib.loads(f"v = {text}")["v"]
            except tomllib.TOMLDecodeError:
                items = None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                return raw, "must be comma-separated values or a TOML array of strings"
            return tuple(i.strip() for i in items if i.strip()), None
        return tuple(p.strip() for p in text.split(",") if p.strip()), None
    return raw, None


def file_state(path: Path) -> str:
    """How the config file at `path` (one `load_config` read) stands: "missing", "holds no
    setting" (empty or comments only, as a crash or a `> config.toml` leaves it: every
    default applies, a `storage.uri` it held no longer), else "read"."""
    if not path.exists():
        return "missing"
    return "read" if _read_toml(path) else "holds no setting"


def file_said(path: Path) -> str:
    """What `config show` and `doctor` say after the config file's path when its settings are
    not what it holds (`file_state`): " (missing: defaults apply)", else nothing."""
    state = file_state(path)
    return "" if state == "read" else f" ({state}: defaults apply)"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        # A pipe would hold every command until something wrote to it; /dev/zero never ends.
        text = read_regular(path, MAX_CONFIG_BYTES)[0].decode("utf-8-sig")  # (a BOM: Notepad)
    except FileNotFoundError:
        return {}
    except TooLarge:
        raise ConfigError("", f"is over {MAX_CONFIG_BYTES >> 20} MiB", str(path)) from None
    except (NotARegularFile, IsADirectoryError):
        raise ConfigError("", "is not a regular file", str(path)) from None
    except NotADirectoryError:  # (OCTOBRAIN_DATA_DIR naming a file: "[Errno 20] Not a …")
        above = next((p for p in path.parents if p.exists()), path.parent)
        reason = f"cannot be read: {above} is a file, not a folder"
        raise ConfigError("", reason, str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"cannot read the file: {exc}", str(path)) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line L, column C)"
        raise ConfigError("", f"invalid TOML: {exc}", str(path)) from exc
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise ConfigError(
            "", "invalid TOML: arrays or inline tables nested too deeply", str(path)
        ) from None
    except ValueError:  # Python reads no integer of over 4,300 digits (int_max_str_digits)
        raise ConfigError(
            "", "invalid TOML: an integer too long to read (TOML's are 64-bit)", str(path)
        ) from None


def _check_shape(data: Mapping[str, Any], cls: type, prefix: str, source: str) -> None:
    """Warn about unknown keys; a section given as a plain value is an error."""
    hints = _hints(cls)
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in hints:
            log.warning("%s: unknown config key %r is ignored", source, dotted)
        elif dataclasses.is_dataclass(hints[key]):
            if not isinstance(value, dict):
                raise ConfigError(dotted, f"must be a table ([{dotted}])", source)
            _check_shape(value, hints[key], f"{dotted}.", source)


def _build(cls: type, values: Mapping[str, Any], prefix: str = "") -> Any:
    kwargs: dict[str, Any] = {}
    for name, typ in _hints(cls).items():
        if dataclasses.is_dataclass(typ):
            kwargs[name] = _build(typ, values, f"{prefix}{name}.")  # type: ignore[arg-type]
        elif f"{prefix}{name}" in values:
            kwargs[name] = values[f"{prefix}{name}"]
    return cls(**kwargs)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load the config file (default `config_path()`), apply env overrides, validate.

    A missing file gives the defaults. Raises `ConfigError` (an `InvalidInput`) on a corrupt
    file, a wrongly typed or out-of-range value, or a bad env override.
    """
    file = check_path("path", path) if path is not None else config_path()
    source = str(file)
    data = _read_toml(file)
    if path is None and os.environ.get("OCTOBRAIN_CONFIG_PATH", "").strip() and not file.exists():
        # Named on purpose, so a typo in it is said rather than every setting quietly lost.
        log.warning("OCTOBRAIN_CONFIG_PATH: %s does not exist; the defaults apply", file)
    _check_shape(data, Config, "", source)

    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for dotted, typ, f in _leaves(Config):
        node: Any = data
        for part in dotted.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            value, problem = _coerce(node, typ)
            if problem:
                raise ConfigError(dotted, problem, source)
            values[dotted], origin[dotted] = value, source
        env = env_var_for(dotted)
        if env in os.environ:
            value, problem = _parse_env(os.environ[env], typ)
            if problem:
                raise ConfigError(env, problem)
            values[dotted], origin[dotted] = value, env
        rule = f.metadata.get("rule")
        if dotted in values and rule is not None:
            problem = rule(values[dotted])
            if problem:
                where = origin[dotted]
                key = dotted if where == source else where
                raise ConfigError(key, problem, source if where == source else None)

    config: Config = _build(Config, values)
    _check_cross(config, origin)
    with contextlib.suppress(TypeError):  # (`check_config` need not check it again)
        _CHECKED.add(config)
    return config


_MISSING = object()


# Configs known to hold every rule (what `load_config` built, or `check_config` checked): a
# config is frozen, and one equal to a checked one holds them too.
_CHECKED: weakref.WeakSet[Config] = weakref.WeakSet()


def check_config(config: Config) -> Config:
    """`config` when each of its values holds its key's type and rule and the rules between
    keys, as `load_config` checks them in a file; else the `ConfigError` naming the key. For a
    `Config` made in Python (`Config(search=SearchConfig(default_limit=0))`), which nothing
    checked: a wrong value failed deep inside, or was used."""
    try:
        if config in _CHECKED:
            return config
    except TypeError:  # (unhashable: a list where a tuple belongs, checked below)
        pass
    for dotted, typ, f in _leaves(Config):
        value: Any = config
        for part in dotted.split("."):
            value = getattr(value, part)
        if typing.get_origin(typ) is tuple and isinstance(value, tuple):
            value = list(value)  # (what `_coerce` reads from a file)
        value, problem = _coerce(value, typ)
        rule = f.metadata.get("rule")
        problem = problem or (rule(value) if rule is not None else None)
        if problem:
            raise ConfigError(dotted, problem)
    _check_cross(config, {})
    with contextlib.suppress(TypeError):
        _CHECKED.add(config)
    return config


def _check_cross(c: Config, origin: Mapping[str, str]) -> None:
    """Rules that involve two keys. A broken one names where its keys were set: the file, or
    the OCTOBRAIN_* variable that overrode it (the file's value was not the one checked)."""

    def refuse(key: str, rule: str, *others: str) -> ConfigError:
        where = dict.fromkeys(origin[k] for k in (key, *others) if k in origin)
        return ConfigError(key, rule, " and ".join(where) or None)

    if c.version > CONFIG_VERSION:
        raise refuse(
            "version", f"{c.version} is newer than this octobrain understands ({CONFIG_VERSION})"
        )
    if c.knowledge.chunk_overlap >= c.knowledge.chunk_size:
        raise refuse(
            "knowledge.chunk_overlap",
            "must be less than knowledge.chunk_size",
            "knowledge.chunk_size",
        )
    if c.knowledge.parent_size < c.knowledge.chunk_size:
        raise refuse(
            "knowledge.parent_size", "must be >= knowledge.chunk_size", "knowledge.chunk_size"
        )
    if c.search.default_limit > c.search.max_results:
        raise refuse("search.default_limit", "must be <= search.max_results", "search.max_results")
    if c.search.vector_weight == 0 and c.search.bm25_weight == 0:
        raise refuse(
            "search.bm25_weight",
            "cannot be 0 when search.vector_weight is 0",
            "search.vector_weight",
        )
    # A non-loopback `mcp.bind` needs a token, but `octobrain mcp` checks that as it starts
    # (`server.http.check_token`): the token may come from --token or OCTOBRAIN_TOKEN, and
    # --bind may override the bind. Refused here, every command failed, memory ones too.


# ---- rendering ---------------------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):  # (JSON's string escapes are TOML's; DEL, which TOML refuses raw,
        return json_printable(v)  # and the C1 codes a terminal acts on, escaped too)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot render {v!r} as TOML")


def _render(obj: Any, prefix: str, comments: bool, lines: list[str]) -> None:
    tables: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            tables.append((f"{prefix}{f.name}", value))
            continue
        if comments and f.metadata.get("doc"):
            lines.append(f"# {f.metadata['doc']}")
        lines.append(f"{f.name} = {_toml_value(value)}")
    for name, table in tables:
        lines.append("")
        doc = (type(table).__doc__ or "").splitlines()[0]
        if comments and doc:
            lines.append(f"# {doc.split(': ', 1)[-1]}")
        lines.append(f"[{name}]")
        _render(table, f"{name}.", comments, lines)


def render_toml(config: Config, *, comments: bool = False) -> str:
    """Render a config as TOML (loads back to an equal `Config`)."""
    lines: list[str] = []
    _render(config, "", comments, lines)
    return "\n".join(lines) + "\n"


def default_config_toml() -> str:
    """A commented template holding every key at its default."""
    header = [
        "# octobrain configuration. Every key is optional: delete what you do not change.",
        "# Any key can be overridden by an environment variable OCTOBRAIN_<SECTION>_<KEY>,",
        "# e.g. OCTOBRAIN_EMBEDDING_MODEL or OCTOBRAIN_SEARCH_HYDE_ALPHA.",
        "",
        "",
    ]
    return "\n".join(header) + render_toml(Config(), comments=True)
