"""A merged memory and its members: forgetting or editing a member rewrites or undoes the merge,
and unconsolidate gives back what the user wrote and the importance each had."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from octobrain.memory.brain import Brain
from octobrain.memory.briefing import build_briefing
from octobrain.models import Memory, RelationshipType
from octobrain.times import utcnow
from tests.consolidation_support import MakeBrain, add_at, all_edges, merged, raw_rows
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared

DEPLOY_NOTES = [
    "Deploys happen on Tuesday afternoons after standup.",
    "Deploys happen on Tuesday afternoons, after the standup, with the release checklist.",
    "Deploys happen on Tuesday afternoons after standup, approved by Dana Whitfield.",
]


def test_forgetting_a_merged_memory_gives_its_members_back(make_brain: MakeBrain) -> None:
    # They stayed consolidated at importance 0.1 under a parent that no longer existed: out of
    # the briefing, not undoable, skipped by every later pass.
    brain = make_brain()
    before = raw_rows(brain)
    parent, notes = merged(brain, DEPLOY_NOTES)
    forgotten = brain.forget([parent.id], confirm=True)
    assert forgotten.deleted == 1 and forgotten.rewritten == []
    assert set(forgotten.restored) == {n.id for n in notes}
    rows = raw_rows(brain)
    assert parent.id not in rows and set(rows) == set(before) | {n.id for n in notes}
    assert {rows[n.id]["state"] for n in notes} == {"working"}
    assert [rows[n.id]["importance"] for n in notes] == pytest.approx([0.5] * 3)
    assert not [e for e in all_edges(brain).values() if parent.id in (e.source_id, e.target_id)]
    shown = {i.memory.id for i in build_briefing(brain).items}
    assert {n.id for n in notes} & shown


def test_forgetting_a_member_takes_its_words_out_of_the_merged_memory(
    make_brain: MakeBrain,
) -> None:
    # The merged memory still said "approved by Dana Whitfield", and answered for it.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    assert "Dana Whitfield" in parent.content
    forgotten = brain.forget([notes[2].id], confirm=True)
    assert (forgotten.deleted, forgotten.restored, forgotten.rewritten) == (1, [], [parent.id])
    rows = raw_rows(brain)
    assert "Dana" not in rows[parent.id]["content"] and "checklist" in rows[parent.id]["content"]
    assert {rows[n.id]["state"] for n in notes[:2]} == {"consolidated"}
    hits = brain.remember("approved by Dana Whitfield", record_access=False).hits
    assert not [h for h in hits if "Dana" in h.memory.content]
    # The rewritten parent is still undoable, and gives back the members it has left.
    assert set(brain.unconsolidate(parent.id).restored) == {n.id for n in notes[:2]}


def test_a_forget_in_a_store_that_never_consolidated_makes_no_journal(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # The check for consolidations a forget touches opened (so made) the journal table.
    brain = make_brain()
    note = add_at(brain, "Deploy day", DEPLOY_NOTES[0], utcnow())
    assert brain.forget([note.id], confirm=True).deleted == 1
    assert not (tmp_path / "consolidations.lance").exists()


def test_forgetting_all_but_one_member_undoes_the_merge(make_brain: MakeBrain) -> None:
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES[1:])
    forgotten = brain.forget([notes[1].id], confirm=True)
    assert (forgotten.restored, forgotten.rewritten) == ([notes[0].id], [])
    rows = raw_rows(brain)
    assert parent.id not in rows and rows[notes[0].id]["state"] == "working"


def test_editing_a_member_rewrites_the_merged_memory(make_brain: MakeBrain) -> None:
    # The merged memory kept the old text and ranked above the corrected member.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    brain.update(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee Chen.")
    content = raw_rows(brain)[parent.id]["content"]
    assert "Lee Chen" in content and "Dana" not in content
    brain.update(notes[0].id, importance=0.9)  # no change of text: the parent is left as it is
    assert raw_rows(brain)[parent.id]["content"] == content


def merged_at(
    brain: Brain, texts: Sequence[str], importances: Sequence[float]
) -> tuple[Memory, list[Memory]]:
    """As `merged`, each note at its importance."""
    now = utcnow()
    notes = [
        add_at(brain, "Deploy day", text, now, importance=imp)
        for text, imp in zip(texts, importances, strict=True)
    ]
    (done,) = brain.sleep_consolidate(threshold=0.3, min_size=2).consolidations
    assert {m.id for m in done.members} == {n.id for n in notes}
    return done.parent, notes


def test_unconsolidate_gives_back_an_importance_that_an_edit_of_a_tag_wrote_again(
    make_brain: MakeBrain,
) -> None:
    # A tag added to a member wrote its damped 0.12 back as float32(0.12), one bit off 0.6 × 0.2,
    # and unconsolidate took that for an importance the user set: the member stayed at 0.12.
    brain = make_brain()
    imps = [0.6, 0.31, 0.29]  # (0.6 and 0.31: two of the 30 in 0.01..1.00 the bit hit)
    parent, notes = merged_at(brain, DEPLOY_NOTES, imps)
    for note in notes:
        brain.update(note.id, add_tags=["deploys"])
    brain.update(notes[2].id, importance=0.9)  # one the user did set: that stays
    brain.unconsolidate(parent.id)
    assert [brain.get(n.id).importance for n in notes] == [0.6, 0.31, 0.9]
    assert {brain.get(n.id).state.value for n in notes} == {"working"}


def test_unconsolidate_gives_back_a_closing_notes_importance_after_an_edit_of_its_tags(
    make_brain: MakeBrain,
) -> None:
    # The note promoted to 0.77 kept it after any edit (a tag): the revert skipped it.
    brain = make_brain()
    goal, _ = brain.memorize("Ship CI", "Goal: a green CI on every branch.", memory_type="goal")
    finding, _ = brain.memorize(
        "CI cache",
        "The CI caches node_modules by lockfile hash.",
        importance=0.7,
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    note, _ = brain.memorize(
        "CI shipped",
        "CI is green on every branch; node_modules cached by lockfile hash.",
        importance=0.3,
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert brain.get(note.id).importance == 0.77
    brain.update(note.id, add_tags=["ci"])
    brain.unconsolidate(note.id)
    closed = brain.get(note.id)
    assert (closed.importance, closed.tags) == (0.3, ["ci"])  # the tag, the user's, stays
    assert brain.get(finding.id).importance == 0.7


def test_a_tag_added_to_a_member_leaves_what_the_user_wrote_in_the_merged_memory(
    make_brain: MakeBrain,
) -> None:
    # The tag-only edit wrote the merged memory again from its members: the user's added fact
    # was gone, silently.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    brain.update(parent.id, content=mine)
    brain.update(notes[0].id, add_tags=["deploys"])
    after = brain.get(parent.id)
    assert after.content == mine and "deploys" in after.tags  # (its tags still follow them)
    # Nor does a member's new wording, nor a forget, write over it: the forget says so.
    brain.update(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee.")
    assert brain.get(parent.id).content == mine
    forgotten = brain.forget([notes[1].id], confirm=True)
    assert forgotten.kept == [parent.id] and brain.get(parent.id).content == mine


def test_an_edit_of_a_member_says_what_became_of_its_merged_memory(make_brain: MakeBrain) -> None:
    # `update` of a member said nothing of a merged memory left saying the member's old words
    # (the user had edited it), which `remember` still ranks above the corrected member.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    done = brain.edit(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee.")
    assert (done.rewritten, done.kept) == ([parent.id], [])
    assert done.memory == brain.get(notes[2].id)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    assert brain.edit(parent.id, content=mine).kept == []  # (the merged memory itself)
    done = brain.edit(notes[0].id, content="Deploys happen on Wednesday mornings now.")
    assert (done.rewritten, done.kept) == ([], [parent.id])
    assert brain.get(parent.id).content == mine
    assert brain.edit(notes[0].id, importance=0.9).kept == []  # no new words: nothing to say


def test_unconsolidate_keeps_a_merged_memory_the_user_edited(make_brain: MakeBrain) -> None:
    # It was deleted, the fact the user added to it with it (only `restore` got it back).
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    brain.update(parent.id, content=mine)
    undone = brain.unconsolidate(parent.id)
    assert (undone.parent_kept, undone.parent_removed) == (True, False)
    assert sorted(undone.restored) == sorted(n.id for n in notes)
    kept = brain.get(parent.id)
    assert (kept.content, kept.state.value) == (mine, "working")
    assert {brain.get(n.id).state.value for n in notes} == {"working"}
    assert not [
        e
        for e in all_edges(brain).values()
        if e.relationship_type is RelationshipType.CONSOLIDATED_FROM
    ]
    # One only its members made is still removed: nothing of it was the user's.
    other = make_brain("github.com/acme/web")
    parent, _ = merged(other, DEPLOY_NOTES)
    other.update(parent.id, importance=0.95)  # (an importance is no words of the user's)
    assert other.unconsolidate(parent.id).parent_removed
    assert parent.id not in raw_rows(other)


def test_forgetting_the_member_a_merged_memorys_importance_came_from_lowers_it(
    make_brain: MakeBrain,
) -> None:
    # The merged memory kept 0.88 (0.8 × 1.1) after the 0.8 member was forgotten.
    brain = make_brain()
    parent, notes = merged_at(brain, DEPLOY_NOTES, [0.5, 0.6, 0.8])
    assert brain.get(parent.id).importance == 0.88
    assert brain.forget([notes[2].id], confirm=True).rewritten == [parent.id]
    assert brain.get(parent.id).importance == 0.66  # max(0.5, 0.6) × 1.1
    # One the user set on it since is theirs.
    other = make_brain("github.com/acme/web")
    fourth = "Deploys happen on Tuesday afternoons after standup, once CI is green."
    parent, notes = merged_at(other, [*DEPLOY_NOTES, fourth], [0.5, 0.6, 0.8, 0.4])
    other.update(parent.id, importance=0.95)
    other.forget([notes[2].id], confirm=True)
    assert other.get(parent.id).importance == 0.95
