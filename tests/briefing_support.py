"""What the briefing's tests share: the projects, the real tokenizer's count, and a memory stored
as if written at a given time."""

from __future__ import annotations

from datetime import datetime

from octobrain.embed.tokens import token_counter
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from octobrain.modelspec import BUNDLED_MODEL_ID

API = "github.com/acme/api"
WEB = "github.com/acme/web"
COUNT = token_counter(BUNDLED_MODEL_ID)  # the real MiniLM tokenizer, whatever the embedder


def add_at(brain: Brain, title: str, content: str, when: datetime, **fields: object) -> Memory:
    """Store a memory as if written (and last used) at `when`."""
    fields.setdefault("scope", brain.scope)
    memory = Memory(
        title=title,
        content=content,
        created_at=when,
        updated_at=when,
        last_accessed=when,
        **fields,  # type: ignore[arg-type]
    )
    brain.store.add([memory], brain.embedder.embed_documents([memory.searchable_text()]))
    return memory
