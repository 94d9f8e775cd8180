"""Test-wide settings."""

import atexit
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Commands that tests run as subprocesses stay in-process, so no test leaves a resident service
# behind; the service tests turn it on for themselves (`env` in tests/service_support.py).
os.environ["OCTOBRAIN_SERVICE_ENABLED"] = "0"
# What a test writes beside a store (embedding cache, mirror snapshots, sleep records) goes to a
# directory of this run's, never the user's own data dir. Tests that need their own set it.
_DATA_DIR = tempfile.mkdtemp(prefix="octobrain-tests-")
os.environ["OCTOBRAIN_DATA_DIR"] = _DATA_DIR
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: every collected test is looked at
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that runs the resident service (the `env` fixture of tests/service_support.py,
    whatever name a file imports it under) is marked `service`. `make test` runs those alone,
    after the others ran two at a time: a command waits a second for a service to bind before
    it runs in-process, so beside other work a service test could see its commands served
    in-process."""
    from tests import service_support

    marked = 0
    for item in items:
        # A file takes the fixture by importing it (`env`, `service_env`), and a fixture of its
        # own that asks for it is in the test's closure too: look those names up where the
        # test was written.
        if not isinstance(item, pytest.Function):
            continue
        places = [p for p in (item.cls, item.module) if p is not None]
        if any(
            getattr(place, name, None) is service_support.env
            for name in item.fixturenames
            for place in places
        ):
            item.add_marker(pytest.mark.service)
            marked += 1
    here = config.invocation_params.dir
    tests_dir = Path(__file__).parent
    whole_suite = any(tests_dir.is_relative_to((here / arg).resolve()) for arg in config.args)
    if whole_suite and marked == 0:
        # `-m service` would run nothing and pass: the service tests would never run.
        raise pytest.UsageError("no test found using the service `env` fixture (tests/conftest.py)")


# A test's background work ends with it: the access counts it queued are committed, and its
# sleep passes and snapshot writes are waited for, before the next test starts. (They went on
# committing into its temporary store while later tests ran.)
_BACKGROUND = ("octobrain-access", "octobrain-sleep", "octobrain-snapshot")
_WAIT_S = 10.0


@pytest.fixture(autouse=True)
def _background_work_ends_with_the_test() -> Iterator[None]:
    yield
    deadline = time.monotonic() + _WAIT_S
    for thread in [t for t in threading.enumerate() if t.name in _BACKGROUND]:
        queue = getattr(getattr(thread, "_target", None), "__self__", None)
        if thread.name == "octobrain-access" and queue is not None:
            # Its queue committed now, as the thread would at the end of its interval (which
            # it then ends with nothing to count): no waiting out a second per test.
            queue.flush()
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            pytest.fail(f"background thread {thread.name} still running {_WAIT_S:g} s after a test")
