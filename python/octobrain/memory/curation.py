"""`Brain`'s curation: the sleep pass (consolidate near-duplicates, archive the long faded),
closing goals by hand, undoing a consolidation, and the store's version history and restore."""

from __future__ import annotations

from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_flag, check_limit
from octobrain.memory import goals, sweep
from octobrain.memory.consolidation import Consolidation, Unconsolidation
from octobrain.memory.sleep import SleepReport, archive_faded, sleep_pass
from octobrain.models import MemoryType
from octobrain.store.sql import visible_scopes
from octobrain.store.timeline import StoreVersion
from octobrain.times import utcnow

if TYPE_CHECKING:
    pass

from octobrain.memory.core import BrainBase


class Curation(BrainBase):
    """Keeping recall sharp as memory grows, and undoing what went wrong."""

    def sleep_consolidate(
        self,
        *,
        threshold: float | None = None,
        min_size: int | None = None,
        max_age_days: float | None = None,
        dry_run: bool = False,
    ) -> SleepReport:
        """One sleep pass over this scope's own rows (never other scopes, never global rows from
        a project): merge clusters of recent near-duplicates (true cosine ≥ `threshold`, complete
        linkage, one trust tier each), then archive long-faded memories. Defaults come from
        `[consolidation]`. `dry_run` reports what would change and writes nothing. The pass is the
        scope's, every role's; with a role, the report names and counts only what it sees."""
        cfg = self.config.consolidation
        dry_run = check_flag("dry_run", dry_run)
        now = utcnow()
        report = sleep_pass(
            self.consolidator,
            self.scope,
            threshold=cfg.threshold if threshold is None else threshold,
            min_size=cfg.min_cluster_size if min_size is None else min_size,
            max_age_days=cfg.max_age_days if max_age_days is None else max_age_days,
            now=now,
            dry_run=dry_run,
            roles=self.sight.roles,
        )
        if cfg.archive_enabled:
            report.archived = archive_faded(
                self.consolidator, self.scope, now, dry_run=dry_run, roles=self.sight.roles
            )
        return report

    def consolidate_goal(self, goal_id: str) -> Consolidation:
        """Close a goal by hand: its working findings in this scope (of one role: this Brain's
        first, `goals.close_goal`) are consolidated under the newest memory of their role that
        `closes` it, or under a synthesised summary of that role when none does."""
        goal = self.get(goal_id, "goal_id")
        if goal.memory_type is not MemoryType.GOAL:
            raise InvalidInput(
                "goal_id", f"memory {goal.id} is a {goal.memory_type.value}, not a goal"
            )
        return goals.close_goal(
            self.consolidator, goal, self.scope, utcnow(), self.sight.roles, self.role
        )

    def unconsolidate(self, parent_id: str) -> Unconsolidation:
        """Undo the consolidations under `parent_id`: members get back their exact state and
        importance, a synthesised parent is deleted, a promoted one gets its importance back."""
        pid = self.resolve_id(parent_id, "parent_id")
        return self.consolidator.unconsolidate(pid, visible_scopes(self.scope))

    def history(self, limit: int = 20) -> list[StoreVersion]:
        """The store's kept versions, newest first (the undo history of every write)."""
        return self.store.history(check_limit(limit, maximum=10_000))

    def restore(self, version: int, *, confirm: bool) -> StoreVersion:
        """Return the WHOLE store (every scope) to an earlier version; needs `confirm=True`.
        The restore is itself a new version, so it can be undone the same way."""
        if confirm is not True:
            raise InvalidInput("confirm", "must be true to restore (nothing was changed)")

        def settle() -> None:
            self.consolidator.settle_restored()
            # The conflicts recorded since went back too: the check starts over (`sweep`).
            sweep.start_over(self.store.location)

        return self.store.restore(check_version(version), settle=settle)


def check_version(version: int) -> int:
    """`version` when it can name a store version (an integer >= 1), else `InvalidInput`."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidInput("version", f"must be a version number >= 1, got {as_json(version)}")
    return version
