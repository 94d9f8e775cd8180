"""Test-wide settings."""

import os

# Commands that tests run as subprocesses stay in-process, so no test leaves a resident service
# behind; tests/test_resident_service.py turns it on for itself.
os.environ["OCTOBRAIN_SERVICE_ENABLED"] = "0"
