"""Where the resident service of this data directory lives and how it behaves: its settings
(`[service]` in the config file, `OCTOBRAIN_SERVICE_*` variables), its key (one service per
user, interpreter, data dir, config file and relevant environment) and its private runtime
directory, or why no service can be used. Standard library only, as `service_client`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import sys
from typing import TYPE_CHECKING

from octobrain.errors import as_json
from octobrain.files import read_regular
from octobrain.runtime_dir import runtime_dir_path

if TYPE_CHECKING:
    from typing import Any

ENABLED_VAR = "OCTOBRAIN_SERVICE_ENABLED"  # overrides `[service] enabled`
_KEY_ENV_PREFIXES = ("OCTOBRAIN_", "AWS_", "AZURE_", "GOOGLE_")
_KEY_ENV_NAMES = ("HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


class Settings:
    """Where this data directory's service lives and how it behaves (from config + env).
    (Plain strings, not pathlib: this module must import quickly.)"""

    __slots__ = ("config_file", "enabled", "idle_seconds", "key", "runtime_dir", "wait_seconds")

    def __init__(
        self,
        enabled: bool,
        idle_seconds: float,
        wait_seconds: float,
        key: str,
        runtime_dir: str,
        config_file: str,
    ) -> None:
        self.enabled = enabled
        self.idle_seconds = idle_seconds
        self.wait_seconds = wait_seconds
        self.key = key
        self.runtime_dir = runtime_dir
        self.config_file = config_file

    def _file(self, suffix: str) -> str:
        return os.path.join(self.runtime_dir, self.key + suffix)

    @property
    def socket_path(self) -> str:
        return self._file(".sock")

    @property
    def lock_path(self) -> str:
        return self._file(".lock")

    @property
    def spawn_lock_path(self) -> str:
        return self._file(".spawn")

    @property
    def start_lock_path(self) -> str:
        return self._file(".start")

    @property
    def log_path(self) -> str:
        return self._file(".log")

    @property
    def stop_path(self) -> str:
        """Word from `service stop` to a successor waiting (`service_client.mark_stopped`)."""
        return self._file(".stopped")


def _data_dir() -> str:
    """What `config.data_dir` answers, without importing it."""
    env = os.environ.get("OCTOBRAIN_DATA_DIR", "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    if sys.platform.startswith("linux"):  # platformdirs' rule, without its import
        base = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
        return os.path.join(base, "octobrain")
    import platformdirs

    return str(platformdirs.user_data_dir("octobrain", appauthor=False))


def _config_file() -> str:
    env = os.environ.get("OCTOBRAIN_CONFIG_PATH", "").strip()
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(_data_dir(), "config.toml")


def _flag(raw: object) -> bool | None:
    if isinstance(raw, bool):
        return raw
    low = str(raw).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    return None


def _seconds(raw: object) -> float | None:
    if isinstance(raw, bool):
        return None
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return value if 0 < value < 1e9 else None


def _service_table(path: str) -> dict[str, Any] | None:
    """The raw `[service]` table; None when the file cannot be read (the full loader, run
    in-process, then reports the problem properly)."""
    try:  # a pipe would hold the command: not a regular file, the loader names the problem
        text = read_regular(path, 1 << 20)[0].decode("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError):
        return None
    if "service" not in text:
        return {}
    import tomllib

    try:
        table = tomllib.loads(text).get("service", {})
    except tomllib.TOMLDecodeError:
        return None
    return table if isinstance(table, dict) else None


def runtime_dir() -> str:
    """A per-user directory for sockets: `$XDG_RUNTIME_DIR/octobrain` when that directory is
    this user's, else `/tmp/octobrain-<uid>`; created 0700. Raises `PermissionError` naming
    what is wrong when it is not a directory of this user's alone (another user's, a link, open
    to others, a file): a socket there could be someone else's, handed every command line.
    (Another user's XDG_RUNTIME_DIR, kept by `sudo -E`: root's folder made in it barred that
    user's own commands from their service.)"""
    root = runtime_dir_path()
    with contextlib.suppress(FileExistsError):  # (a file there is named below)
        os.makedirs(root, mode=0o700, exist_ok=True)
    info = os.lstat(root)
    wrong = None
    if stat.S_ISLNK(info.st_mode):
        wrong = f"is a symbolic link (to {os.readlink(root)})"
    elif not stat.S_ISDIR(info.st_mode):
        wrong = "is not a directory"
    elif info.st_uid != os.getuid():
        wrong = f"belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    elif info.st_mode & 0o077:
        wrong = f"has mode {stat.S_IMODE(info.st_mode):04o}, open to other users, not 0700"
    if wrong is not None:
        raise PermissionError(f"the runtime directory {root} {wrong}")
    return root


def key_environment() -> list[str]:
    """The names of the environment variables that, with their values, make a service of
    their own (`service_key`)."""
    return sorted(
        k
        for k in os.environ
        if (k.startswith(_KEY_ENV_PREFIXES) or k.endswith("_API_KEY") or k in _KEY_ENV_NAMES)
        and not k.startswith("OCTOBRAIN_SERVICE_")
        and k not in ("OCTOBRAIN_DATA_DIR", "OCTOBRAIN_CONFIG_PATH")  # given resolved
    )


def environment_marks() -> dict[str, str]:
    """Each of `key_environment()` with a short hash of its value: enough to tell which
    differ between two processes, never the value (an API key's)."""
    return {
        k: hashlib.sha256(os.environ[k].encode("utf-8", "surrogateescape")).hexdigest()[:8]
        for k in key_environment()
    }


def data_dir() -> str:
    """The data directory this process's commands use (`config.data_dir`, not imported)."""
    return _data_dir()


def service_key(data_dir: str, config_file: str) -> str:
    """One service per user, interpreter, data dir, config file and relevant environment.
    (Values are hashed, so no credential is written anywhere in clear.)"""
    env = [(k, os.environ[k]) for k in key_environment()]
    material = [os.getuid(), sys.executable, data_dir, config_file, env]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()[:24]


def load_settings() -> Settings | None:
    """This process's service settings; None where no service can be used (no AF_UNIX, an
    unreadable config, an unsafe runtime dir, a socket path too long), and
    `why_unavailable()` then says which."""
    _unavailable.clear()
    if not hasattr(socket, "AF_UNIX") or not hasattr(os, "getuid"):
        _unavailable.append("this system has no Unix sockets")
        return None
    try:
        config_file = _config_file()
        table = _service_table(config_file)
        if table is None:
            _unavailable.append(f"the config file {config_file} cannot be read (commands say why)")
            return None
        raw: dict[str, tuple[str, object]] = {}  # key: (where it was set, its value)
        for key, var, default in _SETTINGS:
            if var in os.environ:
                raw[key] = (var, os.environ[var])
            else:
                raw[key] = (f"service.{key} in {config_file}", table.get(key, default))
        enabled = _flag(raw["enabled"][1])
        idle, wait = _seconds(raw["idle_seconds"][1]), _seconds(raw["wait_seconds"][1])
        for key, value in (("enabled", enabled), ("idle_seconds", idle), ("wait_seconds", wait)):
            if value is None:
                what = "true or false" if key == "enabled" else "a number of seconds over 0"
                where, given = raw[key]
                _unavailable.append(f"{where} must be {what}, got {as_json(given)}")
                return None
        assert enabled is not None and idle is not None and wait is not None  # (for mypy)
        directory = runtime_dir()
        settings = Settings(
            enabled, idle, wait, service_key(_data_dir(), config_file), directory, config_file
        )
    except (OSError, ValueError) as exc:
        _unavailable.append(str(exc))
        return None
    size = len(os.fsencode(settings.socket_path))
    if size >= 104:  # AF_UNIX paths stop at 108 bytes (104 on the BSDs)
        _unavailable.append(
            f"its socket path {settings.socket_path} is {size} bytes, over the 103 a Unix "
            "socket takes (a shorter XDG_RUNTIME_DIR)"
        )
        return None
    with contextlib.suppress(OSError):  # (nothing there: the usual case)
        if stat.S_ISDIR(os.lstat(settings.socket_path).st_mode):
            # A service cannot take its place (it removes a stale socket, not a directory):
            # each one started crashed, and `service start` waited 30 s for it.
            _unavailable.append(
                f"its socket path {settings.socket_path} is a directory; remove it (rmdir)"
            )
            return None
    return settings


_unavailable: list[str] = []
_SETTINGS = (("enabled", ENABLED_VAR, True),
             ("idle_seconds", "OCTOBRAIN_SERVICE_IDLE_SECONDS", 600),
             ("wait_seconds", "OCTOBRAIN_SERVICE_WAIT_SECONDS", 5))  # fmt: skip


def why_unavailable() -> str:
    """Why the last `load_settings()` gave None."""
    return _unavailable[-1] if _unavailable else "unknown"
