"""Test-wide settings."""

import atexit
import os
import shutil
import tempfile

# Commands that tests run as subprocesses stay in-process, so no test leaves a resident service
# behind; tests/test_resident_service.py turns it on for itself.
os.environ["OCTOBRAIN_SERVICE_ENABLED"] = "0"
# What a test writes beside a store (embedding cache, mirror snapshots, sleep records) goes to a
# directory of this run's, never the user's own data dir. Tests that need their own set it.
_DATA_DIR = tempfile.mkdtemp(prefix="octobrain-tests-")
os.environ["OCTOBRAIN_DATA_DIR"] = _DATA_DIR
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)
