"""Turning a transaction into the next manifest.

Given the latest committed manifest (or none, for a new table) and a transaction, build the
manifest of the next version the way official Lance does: fragment ids assigned at commit,
row ids and row-version sequences for new fragments when stable row ids are on, feature flags
recomputed, config, table metadata and ``next_row_id`` carried over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.table import feature_flags
from lance_format.table.rowids import encode_row_ids, encode_version_sequence
from lance_format.table.transaction import operation_name, transaction_file_name

WRITER_LIBRARY = "lance-assets"
WRITER_VERSION = "0.1.0"


@dataclass(frozen=True)
class BuildOptions:
    """Settings a commit applies when it creates or overwrites a table."""

    enable_stable_row_ids: bool = False
    data_storage_version: str | None = None  # None: keep the table's (or "2.0" for new tables)


def has_stable_row_ids(manifest: table_pb2.Manifest) -> bool:
    return bool(manifest.reader_feature_flags & feature_flags.STABLE_ROW_IDS)


def _assign_ids(fragments, first_id: int) -> int:
    next_id = first_id
    for fragment in fragments:
        if fragment.id == 0:
            fragment.id = next_id
            next_id += 1
    return next_id


def _assign_row_ids(fragments, next_row_id: int, version: int) -> int:
    for fragment in fragments:
        rows = fragment.physical_rows
        if not fragment.HasField("inline_row_ids") and not fragment.HasField("external_row_ids"):
            fragment.inline_row_ids = encode_row_ids(np.arange(next_row_id, next_row_id + rows, dtype=np.uint64))
            next_row_id += rows
        if not fragment.HasField("inline_created_at_versions") and not fragment.HasField("external_created_at_versions"):
            fragment.inline_created_at_versions = encode_version_sequence(np.full(rows, version, dtype=np.uint64))
        if not fragment.HasField("inline_last_updated_at_versions") and not fragment.HasField(
            "external_last_updated_at_versions"
        ):
            fragment.inline_last_updated_at_versions = encode_version_sequence(
                np.full(rows, version, dtype=np.uint64)
            )
    return next_row_id


def build_manifest(
    previous: table_pb2.Manifest | None,
    txn: transaction_pb2.Transaction,
    options: BuildOptions,
) -> table_pb2.Manifest:
    """The manifest of version ``previous.version + 1`` (or 1) after applying ``txn``."""
    op = operation_name(txn)
    version = previous.version + 1 if previous is not None else 1
    manifest = table_pb2.Manifest()
    if previous is not None:
        manifest.CopyFrom(previous)  # keeps config, table metadata, next_row_id, unknown fields
        for name in ("index_section", "transaction_section", "transaction_section_deprecated", "tag"):
            manifest.ClearField(name)
    elif op != "overwrite":
        raise InvalidInputError(f"cannot apply a {op} operation to a table that does not exist")

    if previous is not None and has_stable_row_ids(previous):
        stable = True
    elif previous is None or op == "overwrite":
        stable = options.enable_stable_row_ids
        if previous is not None and stable and not has_stable_row_ids(previous):
            raise UnsupportedFeatureError("cannot enable stable row ids on an existing table")
    else:
        stable = False
    next_row_id = manifest.next_row_id if stable else 0

    if op == "overwrite":
        body = txn.overwrite
        del manifest.fields[:]
        manifest.fields.extend(body.schema)
        manifest.schema_metadata.clear()
        manifest.schema_metadata.update(body.schema_metadata)
        del manifest.fragments[:]
        new_fragments = list(body.fragments)
        manifest.config.update(body.config_upsert_values)
        storage = options.data_storage_version or (
            previous.data_format.version if previous is not None else "2.0"
        )
        manifest.data_format.file_format = "lance"
        manifest.data_format.version = storage
    elif op == "append":
        new_fragments = list(txn.append.fragments)
    else:
        raise UnsupportedFeatureError(f"operation {op!r} is not supported by this engine yet")

    # pylance 14 keeps counting fragment ids across overwrites (the high-water mark survives).
    first_id = manifest.max_fragment_id + 1 if manifest.HasField("max_fragment_id") else 0
    fragments = [table_pb2.DataFragment() for _ in new_fragments]
    for copy, original in zip(fragments, new_fragments):
        copy.CopyFrom(original)
    _assign_ids(fragments, first_id)
    if stable:
        next_row_id = _assign_row_ids(fragments, next_row_id, version)
        manifest.next_row_id = next_row_id
    else:
        manifest.ClearField("next_row_id")
    manifest.fragments.extend(fragments)

    manifest.version = version
    now = time.time_ns()
    manifest.timestamp.seconds = now // 1_000_000_000
    manifest.timestamp.nanos = now % 1_000_000_000
    manifest.writer_version.library = WRITER_LIBRARY
    manifest.writer_version.version = WRITER_VERSION
    manifest.transaction_file = transaction_file_name(txn)
    if txn.tag:
        manifest.tag = txn.tag
    if len(manifest.fragments) > 0:
        highest = max(f.id for f in manifest.fragments)
        if not manifest.HasField("max_fragment_id") or highest > manifest.max_fragment_id:
            manifest.max_fragment_id = highest
    reader, writer = feature_flags.compute_flags(manifest, stable_row_ids=stable)
    manifest.reader_feature_flags = reader
    manifest.writer_feature_flags = writer
    return manifest


def keeps_indices(txn: transaction_pb2.Transaction) -> bool:
    """Whether the previous version's index section carries over to the new version."""
    return operation_name(txn) not in ("overwrite", "restore")
