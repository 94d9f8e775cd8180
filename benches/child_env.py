"""The environment of an `octobrain` process a script under benches/ starts. Standard library
only, and not in the package: a script run with `PYTHONPATH=<another checkout>/python` imports
it from here."""

from __future__ import annotations

import os
from pathlib import Path


def child_env(data_dir: Path, model: str, *, service: bool = False, **extra: str) -> dict[str, str]:
    """This process's environment without its `OCTOBRAIN_*` settings, with the run's data dir,
    embedding model and resident-service switch (`extra`: more `OCTOBRAIN_*` settings). A
    user's `OCTOBRAIN_STORAGE_URI` or `OCTOBRAIN_CONFIG_PATH` would have sent the run's writes
    to the user's own store; a service left on answers "new" processes warm and outlives the
    run (`service.idle_seconds`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCTOBRAIN_")}
    env.update(
        OCTOBRAIN_DATA_DIR=str(data_dir),
        OCTOBRAIN_EMBEDDING_MODEL=model,
        OCTOBRAIN_SERVICE_ENABLED="1" if service else "0",
        **extra,
    )
    return env
