"""The filters of the memory mirror (`Corpus`): which of its rows a query may return or be
scored by, read off its coded columns (scope, state, type), its role column, its created times
and its list columns (tags, related files), with no row built."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from octobrain.memory.corpus_io import ListCodes, list_holds
from octobrain.models import State
from octobrain.times import micros

if TYPE_CHECKING:
    import pyarrow as pa

    from octobrain.store.sql import Sight

_SEARCHABLE = (State.WORKING.value, State.CONSOLIDATED.value)


class CorpusFilters:
    """The filter methods of `Corpus`, over the columns it mirrors."""

    _code_of: dict[str, dict[str, int]]
    _coded: dict[str, npt.NDArray[Any]]
    _live: npt.NDArray[Any]
    _created: npt.NDArray[Any]
    _lists: ListCodes
    _rows: pa.Table
    # The role mask last made (`_of_roles`): the rows table it was made of, the roles, the mask.
    _role_mask: tuple[pa.Table, tuple[str, ...], npt.NDArray[np.bool_]] | None = None

    if TYPE_CHECKING:

        def columns(self, names: Sequence[str]) -> pa.Table: ...

    def _codes_for(self, name: str, values: Sequence[str]) -> list[int]:
        return [self._code_of[name][v] for v in values if v in self._code_of[name]]

    def coded_in(self, name: str, values: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Positions whose coded column `name` holds one of `values`: one comparison per
        value (a filter names a few), several times faster than `np.isin` at a million rows."""
        column = self._coded[name]
        hit = np.zeros(len(column), dtype=bool)
        for code in dict.fromkeys(self._codes_for(name, values)):
            hit |= column == code
        return hit

    def _of_roles(self, roles: Sequence[str]) -> npt.NDArray[np.bool_]:
        """A mask over positions of the rows (live or not) of one of `roles`, read off the
        mirrored role column; kept until the mirror's rows change."""
        key = tuple(roles)
        made = self._role_mask
        if made is not None and made[0] is self._rows and made[1] == key:
            return made[2]
        import pyarrow as pa
        import pyarrow.compute as pc

        column = self.columns(["role"]).column("role")
        held = pc.is_in(column, value_set=pa.array(key, type=pa.string()))
        mask = np.asarray(held.to_numpy(zero_copy_only=False), dtype=bool)
        self._role_mask = (self._rows, key, mask)
        return mask

    def in_sight(self, positions: npt.NDArray[np.int64], sight: Sight) -> npt.NDArray[np.bool_]:
        """Whether each of `positions` (-1: none) holds a row `sight` sees, read off the coded
        scope column and the role column (no row is built)."""
        codes = np.asarray(self._codes_for("scope", sight.scopes), dtype=self._coded["scope"].dtype)
        held = positions >= 0
        out = np.zeros(len(positions), dtype=bool)
        out[held] = np.isin(self._coded["scope"][positions[held]], codes)
        if sight.roles is not None:
            out[held] &= self._of_roles(sight.roles)[positions[held]]
        return out

    def seen_by(self, sight: Sight) -> npt.NDArray[np.bool_]:
        """A mask over positions of every live row `sight` sees, in any state: the rows whose
        words a search from it is scored by (`BM25Index.search`'s `seen`), so that how rare a
        word is counts only what the asker may see, and no other project's (or role's) rows
        move its ranking or its relevance."""
        mask = self._live & self.coded_in("scope", sight.scopes)
        if sight.roles is not None:
            mask &= self._of_roles(sight.roles)
        return mask

    def allowed(
        self,
        sight: Sight,
        *,
        memory_types: Sequence[str] = (),
        tags: Sequence[str] = (),
        related_files: Sequence[str] = (),
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        include_archived: bool = False,
    ) -> npt.NDArray[np.bool_]:
        """A mask over positions of the live, searchable rows `sight` sees that a query may
        return."""
        states = (*_SEARCHABLE, State.ARCHIVED.value) if include_archived else _SEARCHABLE
        mask = self.seen_by(sight)
        mask &= self.coded_in("state", states)
        if memory_types:
            mask &= self.coded_in("type", memory_types)
        if created_after is not None:
            mask &= self._created >= micros(created_after)
        if created_before is not None:
            mask &= self._created < micros(created_before)
        for wanted, column in ((tags, "tags"), (related_files, "related_files")):
            if wanted:  # any of the wanted values
                mask &= self.holding(column, wanted)
        return mask

    def holding(self, column: str, wanted: Sequence[str]) -> npt.NDArray[np.bool_]:
        """A mask over positions of the rows (live or not, any scope) whose list `column`
        (tags, related files) holds any of `wanted`."""
        rows = self.columns([column])
        return list_holds(rows, column, set(wanted), len(self._live), self._lists)
