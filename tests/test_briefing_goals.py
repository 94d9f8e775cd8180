"""The briefing's goals section: the strongest open goals, then the lately achieved; ties by id."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from octobrain.memory.brain import Brain
from octobrain.memory.briefing import BriefItem, build_briefing
from octobrain.models import Memory, MemoryType, RelationshipType
from octobrain.times import utcnow
from tests.brain_support import MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared
from tests.briefing_support import API, COUNT, add_at


def add_goals(brain: Brain, now: datetime, importances: list[float]) -> list[Memory]:
    """A goal "Goal number i" of each importance, written at `now`."""
    return [
        add_at(brain, f"Goal number {i}", f"Goal: reach milestone {i} of the plan.", now,
               memory_type=MemoryType.GOAL, importance=importance)
        for i, importance in enumerate(importances)
    ]  # fmt: skip


def goal_items(brain: Brain, tmp_path: Path, now: datetime, per_section: int) -> list[BriefItem]:
    """The goals section of `brain`'s briefing at `now`, `per_section` items at most."""
    from dataclasses import replace

    brief = replace(brain.config.brief, max_items_per_section=per_section)
    shown = build_briefing(
        Brain(API, config=replace(brain.config, brief=brief), embedder=brain.embedder,
              uri=tmp_path / "db"),
        now=now,
        max_tokens=50_000,
        count_tokens=COUNT,
    )  # fmt: skip
    return [i for s in shown.sections if s.key == "goals" for i in s.items]


def test_many_goals_show_the_strongest_open_ones_then_the_recently_achieved(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # Goals pile up over months of sessions: the section keeps the strongest open ones, then
    # those achieved within brief.achieved_days, most recent first; one closed long ago is gone.
    from octobrain.models import Relationship

    brain = make_brain(API)
    now = utcnow()
    goals = add_goals(brain, now, [0.3 + i / 100 for i in range(60)])
    closed = {3: 9.0, 5: 2.0, 7: 45.0}  # goal index: days since its closer
    for i, days in closed.items():
        closer = add_at(brain, f"Closed goal {i}", f"Milestone {i} was reached for good.",
                        now - timedelta(days=days), memory_type=MemoryType.PERFORMANCE)  # fmt: skip
        brain.store.add_relationships(
            [Relationship(closer.id, goals[i].id, RelationshipType.CLOSES, scope=API)]
        )
    strongest_open = [f"Goal number {i}" for i in range(59, -1, -1) if i not in closed]

    def goal_lines(per_section: int) -> list[tuple[str, str]]:
        return [(i.memory.title, i.status) for i in goal_items(brain, tmp_path, now, per_section)]

    # Room for all: every open goal by strength, then 5 (2 days ago), then 3 (9); never 7.
    assert goal_lines(100) == [(t, "open") for t in strongest_open] + [
        ("Goal number 5", "achieved"),
        ("Goal number 3", "achieved"),
    ]
    # Room for 8: the 8 strongest open goals.
    assert goal_lines(8) == [(t, "open") for t in strongest_open[:8]]


def test_open_goals_of_equal_strength_show_in_id_order(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # Goals ranked alike (same importance, same time) break their tie by id, whichever of them
    # the store holds first: the open goals past the section's pool are cut at a score floor,
    # and every goal at that floor is ranked, not the first ones met.
    brain = make_brain(API)
    now = utcnow()
    goals = add_goals(brain, now, [0.5] * 40)
    shown = [i.memory.id for i in goal_items(brain, tmp_path, now, 5)]
    assert shown == sorted(m.id for m in goals)[:5]
