"""pylance's ``lance.dataset`` result and argument dicts, plus ``serialize_row_addrs``.

The TypedDicts have pylance's exact keys, so code annotated with them (or building them) runs
unchanged; ``serialize_row_addrs`` writes the roaring treemap bytes pylance's row-address
allow/block lists take.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from datetime import datetime
from typing import TypedDict

import numpy as np
import pyarrow as pa
from pyroaring import BitMap


class AlterColumn(TypedDict):
    """One column change for ``LanceDataset.alter_columns`` (only ``path`` is needed at run time)."""

    path: str
    name: str | None
    nullable: bool | None
    data_type: pa.DataType | None


class DatasetStats(TypedDict):
    num_deleted_rows: int
    num_fragments: int
    num_small_files: int


class DeleteResult(TypedDict):
    num_deleted_rows: int


class UpdateResult(TypedDict):
    num_rows_updated: int


class ExecuteResult(TypedDict):
    num_inserted_rows: int
    num_updated_rows: int
    num_deleted_rows: int


class Tag(TypedDict):
    branch: str | None
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    manifest_size: int
    metadata: dict[str, str]


class Branch(TypedDict):
    parent_branch: str | None
    branch_identifier: list[tuple[int, str]]
    parent_version: int
    create_at: int
    manifest_size: int
    metadata: dict[str, str]


class Version(TypedDict):
    version: int
    timestamp: int | datetime
    metadata: dict[str, str]


class VersionRef(TypedDict):
    version: int


def serialize_row_addrs(addrs: Iterable[int]) -> bytes:
    """Row addresses as a portable roaring treemap (pylance's ``row_addr_allowlist`` bytes).

    The layout is Lance's row-address map: a little-endian u32 count of high 32-bit keys, then per
    key (ascending) the u32 key, the u32 byte length of its bitmap and the portable 32-bit roaring
    bitmap of the low halves.
    """
    values = np.unique(np.fromiter(addrs, dtype=np.uint64))
    highs = (values >> np.uint64(32)).astype(np.uint32)
    lows = (values & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    keys, starts = np.unique(highs, return_index=True)
    bounds = [*starts.tolist(), len(values)]
    parts = [struct.pack("<I", len(keys))]
    for index, key in enumerate(keys.tolist()):
        # no run containers: Lance writes array and bitmap containers only
        bitmap = BitMap(lows[bounds[index]:bounds[index + 1]], optimize=False).serialize()
        parts.append(struct.pack("<II", key, len(bitmap)))
        parts.append(bitmap)
    return b"".join(parts)


__all__ = ["AlterColumn", "DatasetStats", "DeleteResult", "UpdateResult", "ExecuteResult", "Tag", "Branch",
           "Version", "VersionRef", "serialize_row_addrs"]
