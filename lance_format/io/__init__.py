"""IO layer: a table-rooted view of a ``pyarrow.fs`` filesystem with atomic put-if-not-exists."""

from lance_format.io.object_store import ObjectStore, check_relative_path, object_store_for

__all__ = ["ObjectStore", "check_relative_path", "object_store_for"]
