"""What a merge keeps: notes whose numbers conflict are not merged, each side merges with its own
restatements, a summary keeps both sides and stays bounded, its parent found by a member's words."""

from __future__ import annotations

from octobrain.times import utcnow
from tests.consolidation_support import MakeBrain, add_at
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared


def test_near_identical_notes_with_conflicting_numbers_are_not_merged(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    now = utcnow()
    same = [
        add_at(brain, "Timeout", f"The billing service request timeout is {v} seconds.", now)
        for v in (30, 30, 45, 60)
    ]
    report = brain.sleep_consolidate(threshold=0.8, min_size=2)
    merged = [{m.id for m in c.members} for c in report.consolidations]
    assert merged == [{same[0].id, same[1].id}]  # 45 and 60 conflict with 30: left working


def test_each_side_of_a_conflict_merges_with_its_own_restatements(
    make_brain: MakeBrain,
) -> None:
    # One cosine cluster holds both values; the split-off side is clustered again on its own.
    brain = make_brain()
    now = utcnow()
    notes = {
        v: [
            add_at(brain, "Timeout", f"The billing service request timeout is {v} seconds.", now)
            for _ in range(3)
        ]
        for v in (30, 45)
    }
    report = brain.sleep_consolidate(threshold=0.8, min_size=3)
    merged = sorted(({m.id for m in c.members} for c in report.consolidations), key=len)
    assert len(merged) == 2
    assert {frozenset(s) for s in merged} == {frozenset(m.id for m in notes[v]) for v in notes}
    contents = sorted(c.parent.content for c in report.consolidations)
    assert contents == [f"The billing service request timeout is {v} seconds." for v in (30, 45)]


def test_a_merged_memory_keeps_both_sides_of_what_its_members_disagree_on(
    make_brain: MakeBrain,
) -> None:
    # The analyser drops "not" as a stopword, and two sentences a word apart each way looked
    # like one fact reworded: the merged memory said only "Do not use tabs", and lost Bob.
    brain = make_brain()
    now = utcnow()
    said = {
        "Go indentation": [
            "Use tabs for indentation in Go files.",
            "Do not use tabs for indentation in Go files.",
            "Use tabs for indentation in Go files, always.",
        ],
        "Flag owner": [
            "The checkout_v2 feature flag for the web storefront is owned by Alice from payments.",
            "The checkout_v2 feature flag for the web storefront is owned by Bob from payments.",
            "The checkout_v2 feature flag for the web storefront is owned by Alice.",
        ],
    }
    for title, texts in said.items():
        for text in texts:
            add_at(brain, title, text, now)
    report = brain.sleep_consolidate(threshold=0.3, min_size=3)
    parents = {c.parent.title: c.parent.content for c in report.consolidations}
    assert parents["Go indentation"].splitlines() == [
        "- Use tabs for indentation in Go files, always.",
        "- Do not use tabs for indentation in Go files.",
    ]
    assert parents["Flag owner"].splitlines() == [f"- {t}" for t in said["Flag owner"][:2]]


def test_a_summary_too_long_for_one_memory_says_how_many_sentences_it_left_out() -> None:
    from octobrain.memory.summary import summarise

    facts = [f"Appendix {i} says the service listens on port {8000 + i}." for i in range(300)]
    text = summarise(facts, max_bytes=2_000)
    lines = text.splitlines()
    assert len(text.encode()) <= 2_000
    assert lines[:-1] == [f"- {f}" for f in facts[: len(lines) - 1]]
    left = 300 - (len(lines) - 1)
    assert lines[-1] == f"- … and {left} more sentences, in the memories merged here"
    assert summarise(facts[:3], max_bytes=2_000).count("\n") == 2  # all of it fits: no tail


def test_a_summary_of_members_full_of_short_distinct_sentences_is_bounded() -> None:
    # 100,000 distinct sentences (an MCP client's memories, 10 kB each, merged): each was
    # compared with every one kept, and the tail's room summed again per line left out (hours).
    # Past the comparisons it makes, an exact repeat (the first fact, again last) is still one.
    from octobrain.memory.summary import summarise

    facts = [f"Item w{i}x z{i}q holds." for i in range(100_000)]
    text = summarise(["\n".join(facts[:50_000]), "\n".join([*facts[50_000:], facts[0]])])
    lines = text.splitlines()
    assert len(text.encode()) <= 10_000
    assert lines[:-1] == [f"- {f}" for f in facts[: len(lines) - 1]]
    left = 100_000 - (len(lines) - 1)
    assert lines[-1] == f"- … and {left} more sentences, in the memories merged here"


def test_parent_is_found_by_the_wording_of_a_member_it_absorbed(make_brain: MakeBrain) -> None:
    # The summary keeps the fullest sentence; the short one the query quotes was absorbed.
    brain = make_brain()
    now = utcnow()
    short = "API rate limit is 100 requests per minute."
    notes = [
        add_at(brain, "Rate limit", text, now)
        for text in (
            short,
            "The API rate limit is 100 requests per minute per key, enforced at the gateway.",
            "API rate limit: 100 requests per minute per key, enforced at the gateway.",
        )
    ]
    (done,) = brain.sleep_consolidate(threshold=0.5, min_size=3).consolidations
    assert short not in done.parent.content
    # Relevance 0.95: the parent's own text falls short of it (0.93), the member it absorbed not.
    hits = brain.remember(short, limit=5, min_relevance=0.95, record_access=False).hits
    # The parent holds the member's fact, so it answers first; the member stays, below it.
    assert [h.memory.id for h in hits[:2]] == [done.parent.id, notes[0].id]
    assert hits[0].score > hits[1].score
