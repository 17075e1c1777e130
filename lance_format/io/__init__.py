"""IO layer: a table-rooted view of a ``pyarrow.fs`` filesystem (local or S3) with atomic
put-if-not-exists, and Lance-style ``storage_options``."""

from lance_format.io.object_store import ObjectStore, check_relative_path, object_store_for
from lance_format.io.storage_options import normalize_storage_options

__all__ = ["ObjectStore", "check_relative_path", "object_store_for", "normalize_storage_options"]
