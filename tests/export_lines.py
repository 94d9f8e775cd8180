"""Import files made by hand in tests: an export's lines with the end line that counts them."""

from __future__ import annotations

import json
from collections import Counter

KINDS = ("memory", "relationship", "consolidation")


def ended(lines: list[str]) -> list[str]:
    """`lines` without any end line, then the end line counting each kind of line they hold
    (as `memory export` writes it; a file without it was cut short)."""
    kept = [line for line in lines if _kind(line) != "end"]
    counts = Counter(_kind(line) for line in kept)
    return [*kept, json.dumps({"kind": "end", **{k: counts[k] for k in KINDS}})]


def _kind(line: str) -> object:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj.get("kind") if isinstance(obj, dict) else None
