"""Input validation of the memory model: every rule names its field."""

from __future__ import annotations

import math

import pytest

from octobrain.errors import InvalidInput
from octobrain.field_checks import check_id, check_unit
from octobrain.memory.links import parse_links
from octobrain.models import (
    MemoryType,
    RelationshipType,
    Source,
    clean_files,
    clean_tags,
    parse_memory_type,
    parse_source,
)
from octobrain.safe_text import check_text


def test_memory_type_aliases_and_goal() -> None:
    assert parse_memory_type("Bug") is MemoryType.BUG_FIX
    assert parse_memory_type("objective") is MemoryType.GOAL
    assert parse_memory_type("goal") is MemoryType.GOAL
    assert parse_memory_type(None) is MemoryType.CODE
    with pytest.raises(InvalidInput, match=r'^memory_type: unknown memory type "decsion"'):
        parse_memory_type("decsion")


@pytest.mark.parametrize(
    ("given", "meant"),
    [("decisoin", "decision"), ("Archtecture", "architecture"), ("bugfx", "bug_fix")],
)
def test_memory_type_near_miss_says_did_you_mean(given: str, meant: str) -> None:
    with pytest.raises(
        InvalidInput,
        match=rf'unknown memory type "{given}" \(did you mean "{meant}"\?\); use one of',
    ):
        parse_memory_type(given)


def test_memory_type_far_from_any_offers_no_guess() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_memory_type("nonsense")
    assert "did you mean" not in str(caught.value)


def test_sources_and_trust_order() -> None:
    assert parse_source(None) is Source.AGENT_INFERRED
    assert parse_source("confirmed") is Source.USER_CONFIRMED
    tiers = [Source.USER_CONFIRMED, Source.IMPORTED, Source.AGENT_INFERRED, Source.AUTO_LINKED]
    assert [t.trust for t in tiers] == sorted((t.trust for t in tiers), reverse=True)
    assert Source.USER_CONFIRMED.label == "[CONFIRMED]"
    with pytest.raises(InvalidInput, match="^source:"):
        parse_source("me")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "must be 5–200 bytes"),
        ("x" * 201, "must be 5–200 bytes"),
        ("bad\x00title", "NUL"),
        ("bad \ud800 title", "surrogates"),
        (42, "must be a string"),
    ],
)
def test_title_rules(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=f"^title: .*{message}"):
        check_text("title", value, (5, 200))


def test_text_is_trimmed_and_measured_in_bytes() -> None:
    assert check_text("title", "  hello  ", (5, 200)) == "hello"
    # 4 × 2-byte characters = 8 bytes: fits 5–200 although it is 4 characters.
    assert check_text("title", "éééé", (5, 200)) == "éééé"


@pytest.mark.parametrize("value", [-0.1, 1.5, math.nan, math.inf, True, "0.5"])
def test_unit_interval(value: object) -> None:
    with pytest.raises(InvalidInput, match="^importance: must be a number in"):
        check_unit("importance", value)


def test_tags_and_files() -> None:
    assert clean_tags([" a ", "", "a", "b"]) == ["a", "b"]
    with pytest.raises(InvalidInput, match=r"^tags\[0\]: at most 50"):
        clean_tags(["x" * 51])
    with pytest.raises(InvalidInput, match="^tags: at most 10 items"):
        clean_tags([f"t{i}" for i in range(11)])
    with pytest.raises(InvalidInput, match="^tags: must be a list"):
        clean_tags("a,b")
    with pytest.raises(InvalidInput, match=r"^related_files\[1\]: must be a string"):
        clean_files(["a.py", 3])


def test_ids_and_links() -> None:
    uid = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert check_id(uid) == uid.lower()
    with pytest.raises(InvalidInput, match="^memory_id: must be a memory id"):
        check_id("x' OR '1'='1")
    links = parse_links([{"target_id": uid, "relationship_type": "closes"}])
    assert links[0].relationship_type is RelationshipType.CLOSES
    assert links[0].strength == 0.8
    with pytest.raises(InvalidInput, match=r"^related_to\[0\]\.strength"):
        parse_links([{"target_id": uid, "strength": 2}])
    # An optional key sent as null is left out, as memorize's importance is (it was refused:
    # "strength: must be a number", "description: must be a string, got NoneType").
    empty = {"relationship_type": None, "strength": None, "description": None}
    [link] = parse_links([{"target_id": uid, **empty}])
    assert (link.relationship_type, link.strength) == (RelationshipType.RELATED_TO, 0.8)
    with pytest.raises(InvalidInput, match=r"^related_to\[0\]\.relationship_type"):
        parse_links([{"target_id": uid, "relationship_type": "likes"}])
