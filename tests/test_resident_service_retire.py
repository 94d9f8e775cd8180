"""When the resident service leaves: idle (a status question does not keep it), a dependency
upgraded beside it, its config file changed however the edit looks."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from octobrain.cli.service_client import ask
from tests.service_support import (
    SCOPE,
    cli,
    current_settings,
    memorize,
    start_service,
    wait_for,
)
from tests.service_support import env as env  # (the `env` fixture)


def test_idle_service_exits(env: dict[str, str]) -> None:
    env = {**env, "OCTOBRAIN_SERVICE_IDLE_SECONDS": "1"}
    done = cli(env, "service", "start", "--wait", "90")
    assert done.returncode == 0, done.stderr
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), (
        "the idle service kept running"
    )
    assert ask(settings, "status") is None
    status = cli(env, "service", "status")
    assert status.returncode == 0 and status.stdout.startswith(b"not running")


def test_asking_its_status_does_not_keep_an_idle_service_alive(env: dict[str, str]) -> None:
    # Before: each `service status` counted as a request: idle 0 s always, and a status bar
    # asking every few seconds kept the service (hundreds of MB) from ever idling out.
    env = {**env, "OCTOBRAIN_SERVICE_IDLE_SECONDS": "4"}
    done = cli(env, "service", "start", "--wait", "90")
    assert done.returncode == 0, done.stderr
    settings = current_settings()
    idle = []
    for _ in range(2):
        time.sleep(1.5)
        info = ask(settings, "status")
        if info is not None:
            idle.append(float(info["idle_for"]))
    assert idle and idle[-1] >= 1.4, idle
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "kept alive by status"


def test_a_dependency_upgraded_beside_it_retires_the_service(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Before: the fingerprint a service answers for was octobrain's own files only, so after
    # `pip install -U lancedb` (or any package octobrain imports) the running service went on
    # answering every command with the old one loaded.
    packages = tmp_path / "site-packages"  # (a package directory on the path, as pip's is)
    (packages / "lancedb-0.21.0.dist-info").mkdir(parents=True)
    env = {**env, "PYTHONPATH": str(packages)}
    start_service(env)
    pid = int(ask(current_settings(), "status")["pid"])  # type: ignore[index]
    (packages / "lancedb-0.21.0.dist-info").rename(packages / "lancedb-0.22.0.dist-info")
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout) == (0, b"No memories yet.\n")
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "old packages served"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 0)
        assert wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30), "old service kept"


def test_changed_config_file_retires_the_service(env: dict[str, str]) -> None:
    start_service(env)
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[search]\ndefault_limit = 3\n", encoding="utf-8")
    done = cli(env, "memory", "--scope", SCOPE, "recent")
    assert (done.returncode, done.stdout) == (0, b"No memories yet.\n")
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "stale config served"


def test_a_config_edit_that_keeps_its_size_and_mtime_retires_the_service(
    env: dict[str, str],
) -> None:
    # The service compared the config file's mtime and size: an edit of the same length whose
    # mtime was put back (`touch -d`, `cp -p`, a same-tick edit on a coarse clock) was never
    # seen, and the service answered with the old config for the rest of its life.
    config = Path(env["OCTOBRAIN_DATA_DIR"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[search]\ndefault_limit = 1\n", encoding="utf-8")
    for n in range(3):
        memorize(
            env, f"Deploy note {n}", f"We deploy the api with blue green, step {n}.", service=False
        )
    start_service(env)
    before = os.stat(config)
    config.write_text("[search]\ndefault_limit = 3\n", encoding="utf-8")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(config).st_mtime_ns, os.stat(config).st_size) == (
        before.st_mtime_ns,
        before.st_size,
    )
    done = cli(env, "memory", "--scope", SCOPE, "remember", "deploy api", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["results"]) == 3
    settings = current_settings()
    assert wait_for(lambda: not os.path.exists(settings.socket_path), 30), "the old config served"
