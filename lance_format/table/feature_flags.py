"""Reader and writer feature flags, set and checked exactly as official Lance does.

A reader must refuse a table whose reader flags it does not understand; a writer must refuse a
table whose writer flags it does not understand. Unknown bits mean a newer format feature whose
semantics would otherwise be silently ignored.
"""

from __future__ import annotations

from lance_format.errors import UnsupportedFeatureError
from lance_format.proto import table_pb2

DELETION_FILES = 1
STABLE_ROW_IDS = 2
USE_V2_FORMAT_DEPRECATED = 4
TABLE_CONFIG = 8
BASE_PATHS = 16
DATA_OVERLAYS = 64  # a fragment has data overlay files (pylance 14's DataOverlay)

_NAMES = {
    DELETION_FILES: "deletion files",
    STABLE_ROW_IDS: "stable row ids",
    USE_V2_FORMAT_DEPRECATED: "v2 format (deprecated)",
    TABLE_CONFIG: "table config",
    BASE_PATHS: "multiple base paths",
    DATA_OVERLAYS: "data overlays",
}
# Flags this engine implements.
SUPPORTED = DELETION_FILES | STABLE_ROW_IDS | USE_V2_FORMAT_DEPRECATED | TABLE_CONFIG | BASE_PATHS | DATA_OVERLAYS


def compute_flags(manifest: table_pb2.Manifest, *, stable_row_ids: bool) -> tuple[int, int]:
    """(reader_flags, writer_flags) official Lance would write for this manifest."""
    reader = 0
    if any(f.HasField("deletion_file") for f in manifest.fragments):
        reader |= DELETION_FILES
    if stable_row_ids:
        reader |= STABLE_ROW_IDS
    if len(manifest.base_paths) > 0:
        reader |= BASE_PATHS
    if any(len(f.overlays) for f in manifest.fragments):
        reader |= DATA_OVERLAYS
    writer = reader
    if len(manifest.config) > 0:
        writer |= TABLE_CONFIG
    return reader, writer


def describe(flags: int) -> str:
    names = [name for bit, name in _NAMES.items() if flags & bit]
    unknown = flags & ~sum(_NAMES)
    if unknown:
        names.append(f"unknown bits {unknown:#x}")
    return ", ".join(names) or "none"


def check_readable(manifest: table_pb2.Manifest, *, table: str, path: str) -> None:
    unsupported = manifest.reader_feature_flags & ~SUPPORTED
    if unsupported:
        raise UnsupportedFeatureError(
            f"cannot read: the table uses reader features this engine does not support ({describe(unsupported)})",
            table=table,
            version=manifest.version,
            path=path,
        )


def check_writable(manifest: table_pb2.Manifest, *, table: str, path: str) -> None:
    check_readable(manifest, table=table, path=path)
    unsupported = manifest.writer_feature_flags & ~SUPPORTED
    if unsupported:
        raise UnsupportedFeatureError(
            f"cannot write: the table uses writer features this engine does not support ({describe(unsupported)})",
            table=table,
            version=manifest.version,
            path=path,
        )
