"""Storage: LanceDB tables on local disk (or an object store URI)."""

from octobrain.store.failures import ModelMismatch, NotFound
from octobrain.store.memories import MemoryStore

__all__ = ["MemoryStore", "ModelMismatch", "NotFound"]
