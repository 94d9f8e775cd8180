"""Import files made by hand in tests: an export's lines with the counts of its header and end
line made those of the lines it holds."""

from __future__ import annotations

import json
from collections import Counter

KINDS = ("memory", "relationship", "consolidation")


def ended(lines: list[str]) -> list[str]:
    """`lines` without any end line, then the end line counting each kind of line they hold
    (as `memory export` writes it; a file without it was cut short), and a header's count of
    memories made theirs."""
    kept = [line for line in lines if _kind(line) != "end"]
    counts = Counter(_kind(line) for line in kept)
    kept = [_counted(line, counts["memory"]) if _kind(line) == "header" else line for line in kept]
    return [*kept, json.dumps({"kind": "end", **{k: counts[k] for k in KINDS}})]


def _counted(header: str, memories: int) -> str:
    obj = json.loads(header)
    return json.dumps({**obj, "count": memories}) if "count" in obj else header


def _kind(line: str) -> object:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj.get("kind") if isinstance(obj, dict) else None
