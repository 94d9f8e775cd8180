"""`Brain`'s edit of a memory in place (`update`, and `edit`, which also says what the edit
changed in the merged memories that hold it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from octobrain.embed.base import Vectors, ahead
from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_id_ref, check_strings, check_unit
from octobrain.memory.core import BrainBase
from octobrain.models import (
    CONTENT_BYTES,
    TITLE_BYTES,
    Memory,
    Source,
    State,
    clean_files,
    clean_tags,
    parse_memory_type,
    parse_source,
)
from octobrain.safe_text import check_lines, check_one_line
from octobrain.times import utcnow


@dataclass(frozen=True)
class Edited:
    """What `edit` did: the memory as written, and, for a member of a merged memory whose
    words changed, what became of the merged memories that hold it."""

    memory: Memory
    rewritten: list[str] = field(default_factory=list)  # written again with the edit
    # Merged memories whose words the user edited since the merge: left as written (they may
    # still say what this memory said before the edit).
    kept: list[str] = field(default_factory=list)


class Edits(BrainBase):
    """Editing memories in place."""

    def update(
        self,
        memory_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        add_files: Iterable[str] = (),
        remove_files: Iterable[str] = (),
        source: str | Source | None = None,
    ) -> Memory:
        """Edit a memory in place; the memory as written (`edit` says also what the edit
        changed in merged memories that hold it). Its scope never changes; text edits
        re-embed it. `source`: who vouches for it now (None: as before)."""
        return self.edit(
            memory_id,
            title=title,
            content=content,
            memory_type=memory_type,
            importance=importance,
            add_tags=add_tags,
            remove_tags=remove_tags,
            add_files=add_files,
            remove_files=remove_files,
            source=source,
        ).memory

    def edit(
        self,
        memory_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        add_tags: Iterable[str] = (),
        remove_tags: Iterable[str] = (),
        add_files: Iterable[str] = (),
        remove_files: Iterable[str] = (),
        source: str | Source | None = None,
    ) -> Edited:
        """`update`, saying too what became of the merged memories a member's new words
        reach (`Edited`): written again with them, or, one whose words the user edited since
        the merge, left as written (it may still say what the member said before).

        Read, edit and write happen under the store's write lock, so a concurrent edit (another
        process's update, a consolidation) is never overwritten by this one.
        """
        self.embedder.prepare()  # loads while the store opens and the row is read
        vouched = None if source is None else parse_source(source)
        edit = self._edit(
            (title, content, memory_type, importance, vouched),
            add_tags,
            remove_tags,
            add_files,
            remove_files,
        )
        early = self._embedded_early(memory_id, edit)
        with self.store.write_lock():
            current = self.get(memory_id)
            updated = edit(current)
            if replace(updated, updated_at=current.updated_at) == current:
                return Edited(current)  # (it said all this already: no new version)
            text = updated.embedded_text()
            if early is not None and early[0] == text:
                vector = early[1]()
            else:
                vector = self.embedder.embed_documents([text])
            self.store.replace(updated, vector[0], read=current)
            if current.state is State.CONSOLIDATED and text != current.embedded_text():
                merged = self.consolidator.edited(current)  # they say it as it is now
                return Edited(updated, merged.rewritten, merged.kept)
            return Edited(updated)

    def _edit(
        self,
        given: tuple[str | None, str | None, str | None, float | None, Source | None],
        add_tags: Iterable[str],
        remove_tags: Iterable[str],
        add_files: Iterable[str],
        remove_files: Iterable[str],
    ) -> Callable[[Memory], Memory]:
        """An update's fields checked (a refusal names a field as given: `add_tags[0]`, not
        its place among the memory's tags once merged), as a function of the memory read. An
        update that changes nothing, or adds and removes one tag or file, is refused (the first
        wrote a version all the same, the second kept the tag without a word)."""
        title, content, memory_type, importance, source = given
        add_tags, remove_tags, add_files, remove_files = (
            check_strings(name, values)
            for name, values in (
                ("add_tags", add_tags),
                ("remove_tags", remove_tags),
                ("add_files", add_files),
                ("remove_files", remove_files),
            )
        )
        if all(v is None for v in given) and not (
            add_tags or remove_tags or add_files or remove_files
        ):
            raise InvalidInput(
                "update",
                "nothing to change: give a title, content, memory type, importance or source, "
                "or tags or files to add or remove",
            )
        for field_name, added, removed in (
            ("remove_tags", add_tags, remove_tags),
            ("remove_files", add_files, remove_files),
        ):
            if both := sorted(set(added) & set(removed)):
                other = field_name.replace("remove", "add")
                raise InvalidInput(
                    field_name, f"names {as_json(both[0])}, which {other} adds; not both"
                )
        new_title = None if title is None else self._text("title", title, TITLE_BYTES)
        check_one_line("title", new_title)
        check_lines("add_tags", list(add_tags))
        check_lines("add_files", list(add_files))
        clean_tags(add_tags, "add_tags")
        clean_files(add_files, "add_files")
        new_content = None if content is None else self._text("content", content, CONTENT_BYTES)
        new_type = None if memory_type is None else parse_memory_type(memory_type)
        new_importance = None if importance is None else check_unit("importance", importance)

        def edit(current: Memory) -> Memory:
            tags = [t for t in current.tags if t not in set(remove_tags)] + list(add_tags)
            files = [f for f in current.related_files if f not in set(remove_files)]
            return replace(
                current,
                title=current.title if new_title is None else new_title,
                content=current.content if new_content is None else new_content,
                memory_type=current.memory_type if new_type is None else new_type,
                importance=current.importance if new_importance is None else new_importance,
                source=current.source if source is None else source,
                tags=self._each("tags", clean_tags(tags)),
                related_files=self._each("related_files", clean_files(files + list(add_files))),
                updated_at=utcnow(),
            )

        return edit

    def _embedded_early(
        self, memory_id: str, edit: Callable[[Memory], Memory]
    ) -> tuple[str, Callable[[], Vectors]] | None:
        """The edit of the memory as this process's mirror holds it (a hook has just read it
        there), embedded from now on while the store opens and the row is read: (its text,
        its vectors), used only if the row read under the lock edits to the same text. None
        when the mirror holds no such memory, or its edit is refused."""
        full_id, full = check_id_ref(memory_id)  # (a prefix is looked up in the store)
        held = self.retriever.corpus.held(full_id) if full else None
        if held is None:
            return None
        try:
            text = edit(held).embedded_text()
        except InvalidInput:  # (the row read under the lock says why, if it is refused too)
            return None
        return text, ahead(lambda: self.embedder.embed_documents([text]))
