"""A store's history: bulk forgets and links undone by a restore, and restores cut short, before
the journal, or to a lost version."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput, StorageError
from octobrain.memory.export import export_jsonl
from tests.brain_support import POSTGRES, TOKEN_BUCKET, MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared


def test_history_undoes_a_bulk_forget_and_a_restore_can_be_undone(make_brain: MakeBrain) -> None:
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    b, _ = brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    before = brain.history(1)[0]
    assert before.rows == 2
    gone = [
        m.id for m in brain.forget_preview("token bucket rate limiting postgres", min_relevance=0.0)
    ]
    assert brain.forget(gone, confirm=True).deleted == 2
    assert brain.remember("token bucket", min_relevance=0.0).hits == []
    with pytest.raises(InvalidInput, match="^confirm: must be true"):
        brain.restore(before.version, confirm=False)
    with pytest.raises(InvalidInput, match="^version: no version 999999 is kept"):
        brain.restore(999999, confirm=True)
    after_forget = brain.history(1)[0]
    restored = brain.restore(before.version, confirm=True)
    assert restored.rows == 2 and restored.version > after_forget.version
    fresh = make_brain()  # another process's view
    assert fresh.get(a.id) == brain.get(a.id) and fresh.get(b.id).title == POSTGRES[0]
    assert [h.memory.id for h in fresh.remember("token bucket").hits] == [a.id]
    assert {(r.source_id, r.target_id) for r in fresh.store.relationships_of([a.id])} == {
        (b.id, a.id)
    }
    brain.restore(after_forget.version, confirm=True)  # undo the undo
    assert make_brain().remember("token bucket", min_relevance=0.0).hits == []


def test_a_link_made_or_removed_alone_is_a_version_restore_goes_back_to(
    make_brain: MakeBrain,
) -> None:
    # `relate` and `unrelate` wrote edges only: no memories version, so `history` did not list
    # them and a restore took the edges back to the next version, "now": a link removed with
    # `unrelate` could not be got back.
    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    b, _ = brain.memorize(*POSTGRES)
    before = brain.history(1)[0]
    brain.relate(a.id, b.id, "depends_on", description="the limits live in Postgres")
    linked = brain.history(1)[0]
    brain.unrelate(a.id, b.id, "depends_on")
    unlinked = brain.history(1)[0]
    assert before.version < linked.version < unlinked.version
    assert linked.note == f"links {a.id[:8]} → {b.id[:8]} (depends_on)"
    assert unlinked.note == f"unlinks {a.id[:8]} → {b.id[:8]} (depends_on)"
    brain.restore(linked.version, confirm=True)
    [edge] = make_brain().store.relationships_of([a.id])
    assert (edge.target_id, edge.description) == (b.id, "the limits live in Postgres")
    brain.restore(before.version, confirm=True)
    assert make_brain().store.relationships_of([a.id]) == []
    assert make_brain().get(a.id) == brain.get(a.id)


def test_a_restore_cut_short_is_refused_until_run_again(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its tables go back one commit each: cut short after memories, the edges still name a row
    # that is gone. Every open refuses the store until the restore is run again.
    from lancedb.table import LanceTable

    from octobrain.store.doctor import diagnose

    brain = make_brain()
    a, _ = brain.memorize(*TOKEN_BUCKET)
    before = brain.history(1)[0]
    brain.memorize(*POSTGRES, related_to=[{"target_id": a.id}])
    real, calls = LanceTable.restore, []

    def cut_short(self: LanceTable, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:  # Ctrl-C once memories is back, before relationships is
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(LanceTable, "restore", cut_short)
    with pytest.raises(KeyboardInterrupt):
        brain.restore(before.version, confirm=True)
    monkeypatch.setattr(LanceTable, "restore", real)
    fresh = make_brain()  # the next process
    with pytest.raises(StorageError, match=rf"`memory restore {before.version}` was cut short"):
        fresh.recent()
    [problem] = diagnose(fresh.store.location).problems
    assert f"memory restore {before.version} --yes" in problem.repair
    make_brain().restore(before.version, confirm=True)
    done = make_brain()
    assert [m.id for m in done.recent()] == [a.id] and done.store.relationships_of([a.id]) == []
    assert diagnose(done.store.location).ok


def test_a_restore_to_before_the_journal_existed_empties_it(make_brain: MakeBrain) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Goal: faster API", "Bring p95 latency under 200 ms.", memory_type="goal"
    )
    before = brain.history(1)[0]
    brain.memorize(
        *TOKEN_BUCKET, related_to=[{"target_id": goal.id, "relationship_type": "achieves"}]
    )
    brain.memorize(
        "Latency goal reached",
        "p95 is 170 ms now that rate limiting sheds abusive clients.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()  # the journal, made after `before`
    brain.restore(before.version, confirm=True)
    out = io.StringIO()
    export_jsonl(make_brain(), out)
    assert '"kind": "consolidation"' not in out.getvalue()
    assert [m.id for m in make_brain().recent()] == [goal.id]


def test_a_restore_to_a_version_lost_in_the_middle_names_the_versions_kept(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # With a middle version's manifest gone, "no version 3 is kept (kept: 1–8)" said 3 was kept.
    brain = make_brain()
    for i in range(3):
        brain.memorize(f"Fact {i}", f"The fact number {i} of this store.")
    numbers = sorted(v.version for v in brain.history())
    lost = numbers[len(numbers) // 2]
    manifests = (tmp_path / "db" / "memories.lance" / "_versions").glob("*.manifest")
    gone = [m for m in manifests if int(m.stem) == 2**64 - 1 - lost]
    assert len(gone) == 1, "(Lance names a manifest 2^64 - 1 - version)"
    gone[0].unlink()
    again = make_brain()
    said = rf"^version: no version {lost} is kept \(kept: .*{lost - 1}, {lost + 1}"
    with pytest.raises(InvalidInput, match=said):
        again.restore(lost, confirm=True)
