"""Memory peaks measured in a new Python process.

`tracemalloc.stop()` racing a thread that allocates through Python's raw allocator crashes
CPython 3.11 (a segmentation fault of the whole test run): a thread of LanceDB's runtime
entering Python does, and a test's process holds such threads left by the tests before it.
A new process holds none.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

_RUNNER = """
import json, sys, tracemalloc
{source}
inputs = prepare()
tracemalloc.start()
try:
    result = work(*inputs)
    held, peak = tracemalloc.get_traced_memory()
finally:
    tracemalloc.stop()
json.dump({{"result": result, "held": held, "peak": peak}}, sys.stdout)
"""


def traced(*sources: str) -> dict[str, Any]:
    """Run `work(*prepare())` of `sources` (Python defining both, each indented as it likes;
    a later definition replaces an earlier one) in a new process, its allocations traced from
    the call: {"result": what `work` returned (JSON), "held": bytes still held after it,
    "peak": the most held during it}."""
    code = _RUNNER.format(source="\n".join(textwrap.dedent(s) for s in sources))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found
