"""The links a `memorize` asks for (`related_to`): checked, with a clear error naming the entry
and the rule, before anything is stored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from octobrain.errors import InvalidInput
from octobrain.field_checks import check_id_ref, check_unit
from octobrain.models import LINK_DESCRIPTION_CHARS, MAX_LINKS, RelationshipType, parse_link_type
from octobrain.safe_text import plain_string


@dataclass(frozen=True)
class Link:
    """A relationship requested at memorize time."""

    target_id: str
    relationship_type: RelationshipType = RelationshipType.RELATED_TO
    strength: float = 0.8
    description: str = "Linked at memorize time"


def link_description(field_name: str, value: object) -> str:
    """A link's description: a string of at most `LINK_DESCRIPTION_CHARS` characters, without
    NUL or lone surrogates; returned trimmed."""
    text = plain_string(field_name, value)
    if len(text) > LINK_DESCRIPTION_CHARS:
        raise InvalidInput(
            field_name, f"must be at most {LINK_DESCRIPTION_CHARS} characters, got {len(text)}"
        )
    return text


def parse_links(values: Sequence[object] | None) -> list[Link]:
    """Validate `related_to` entries (dicts or Link) into Links; a `target_id` may still be an
    id prefix (`check_id_ref`), which `Brain.memorize` resolves."""
    if values is None:
        return []
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InvalidInput(
            "related_to", "must be a list of {target_id, relationship_type, strength, description}"
        )
    if len(values) > MAX_LINKS:
        raise InvalidInput("related_to", f"at most {MAX_LINKS} links, got {len(values)}")
    links = []
    for i, raw in enumerate(values):
        name = f"related_to[{i}]"
        if isinstance(raw, Link):
            links.append(raw)
            continue
        if not isinstance(raw, dict):
            raise InvalidInput(name, "must be an object with target_id and relationship_type")
        unknown = set(raw) - {"target_id", "relationship_type", "strength", "description"}
        if unknown:
            raise InvalidInput(name, f"unknown keys {sorted(unknown)}")
        # An optional key sent as null is left out, as memorize's importance is: what a JSON
        # client sends for a value it has none of (and the MCP SDK writes for a NaN).
        given = {key: value for key, value in raw.items() if value is not None}
        description = link_description(
            f"{name}.description", given.get("description", Link.description)
        )
        links.append(
            Link(
                target_id=check_id_ref(raw.get("target_id"), field_name=f"{name}.target_id")[0],
                relationship_type=parse_link_type(
                    given.get("relationship_type", "related_to"),
                    field_name=f"{name}.relationship_type",
                ),
                strength=check_unit(f"{name}.strength", given.get("strength", Link.strength)),
                description=description or Link.description,
            )
        )
    return links
