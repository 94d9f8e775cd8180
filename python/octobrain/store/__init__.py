"""Storage: LanceDB tables on local disk (or an object store URI)."""

from octobrain.store.memories import MemoryStore, ModelMismatch, NotFound

__all__ = ["MemoryStore", "ModelMismatch", "NotFound"]
