"""The engine's public face for distributed writes (the Spark connector's one door into it).

A distributed write has two phases, like pylance's ``LanceFragment.create`` + ``commit``:

1. Tasks (any process) write data files with a :class:`FragmentSink` under a write id's prefix
   and report each fragment in ONE form: pylance's ``FragmentMetadata`` JSON (:func:`fragment_json`).
2. One process (the driver) reads those back (``FragmentMetadata.from_json``) and commits them
   as ONE transaction with :func:`commit_fragments`: an Append, Overwrite, Update (new rows plus
   new deletion files) through pylance's ``LanceOperation``/``Transaction`` protocol, or a Merge
   that also adds columns. Either way it is the engine's commit loop, so concurrent writers go
   through the same conflict rules as any other commit.

Also here:

* idempotency: a write may carry ``IDEMPOTENCY_KEY`` in its transaction properties; a re-run
  finds the earlier version by that key (:func:`find_committed_version`) and skips the work;
* cleanup: :func:`discard_uncommitted` removes the data and deletion files of a write that
  did not commit, and only those that no manifest references (a commit may have landed before
  an error was reported);
* deletion vectors for an Update: :func:`delete_rows` writes a fragment's new deletion file
  with a name derived from the write id, so a failed write's deletion files can be found;
* the pieces of the engine a distributed reader and writer needs (scan planning, versions and
  their transactions, schemas on the wire), re-exported so that ``lance_format.spark`` imports
  nothing below this module (an import-linter contract in pyproject.toml holds it to that).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lance_format.dataset.changes.materialize import ChangeWriter, change_schema
from lance_format.dataset.changes.plan import (
    NO_CHANGE_OPERATIONS,
    VersionChanges,
    plan_version,
    require_stable_row_ids,
    same_last_updated,
)
from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.evolution.base import next_field_id_of
from lance_format.dataset.evolution.new_column_writes import commit_with_new_columns
from lance_format.dataset.fragment import ROW_ADDRESS, ROW_ID, SYSTEM_COLUMNS
from lance_format.dataset.fragment_metadata import FragmentMetadata, fragment_from_proto, fragment_to_proto
from lance_format.dataset.index_vector import check_vector_request, sample_size
from lance_format.dataset.indices import check_index_request
from lance_format.dataset.lance_operations import Index, LanceOperation, Transaction, index_from_proto, index_to_proto
from lance_format.dataset.maintenance.compaction import compact_files
from lance_format.dataset.scan import FragmentRange, ScanExecutor, plan_scan
from lance_format.dataset.sql.filter import to_expression
from lance_format.dataset.transactions_api import commit_lance_transaction
from lance_format.dataset.writing.fragment_sink import (
    DATA_DIR,
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    STAGED_MARK,
    FragmentSink,
    new_write_id,
    resolve_storage_version,
    staged_file_name,
    write_prefix,
)
from lance_format.errors import InvalidInputError, LanceError
from lance_format.file.writer import DataFileWriter
from lance_format.index.vector.ivf_build import Trained
from lance_format.index.vector.ivf_build import normalize as normalize_vectors
from lance_format.index.vector.ivf_build import train as train_ivf
from lance_format.index.vector.params import VectorIndexParams
from lance_format.index.vector.pq import ProductQuantizer
from lance_format.index.vector.sq import ScalarQuantizer
from lance_format.io import ObjectStore, normalize_storage_options, object_store_for
from lance_format.io.decode_pool import serial_decoding
from lance_format.proto import file_pb2, table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.schema.arrow_checks import check_batch
from lance_format.table.commit import CommittedVersion, latest_manifest
from lance_format.table.deletion import (
    BITMAP_THRESHOLD,
    DELETIONS_DIR,
    deletion_file_path,
    encode_arrow_deletions,
    encode_bitmap_deletions,
    live_row_count,
    read_deletion_file,
)
from lance_format.table.feature_flags import check_writable
from lance_format.table.manifest import read_manifest
from lance_format.table.naming import list_versions
from lance_format.table.transaction import (
    COMMIT_MESSAGE_KEY,
    IDEMPOTENCY_KEY,
    OperationKind,
    has_stable_row_ids,
    load_transaction,
    operation_name,
)

# the manifest-format messages a distributed reader or writer holds (type names for its annotations)
DataFragment = table_pb2.DataFragment
Manifest = table_pb2.Manifest

WRITE_ID_KEY = "lance_format.write_id"
DEFAULT_IDEMPOTENCY_WINDOW = 256  # how many recent versions a re-run searches for its key

OPERATIONS = (OperationKind.APPEND.value, OperationKind.OVERWRITE.value, OperationKind.UPDATE.value,
              OperationKind.MERGE.value)


@dataclass(frozen=True)
class PriorCommit:
    """A version committed earlier by a write with the same idempotency key."""

    version: int
    transaction: transaction_pb2.Transaction

    @property
    def new_fragments(self) -> list[table_pb2.DataFragment]:
        op = operation_name(self.transaction)
        if op == OperationKind.APPEND:
            return list(self.transaction.append.fragments)
        if op == OperationKind.OVERWRITE:
            return list(self.transaction.overwrite.fragments)
        if op == OperationKind.UPDATE:
            return list(self.transaction.update.new_fragments)
        return []


def find_committed_version(
    uri: str | os.PathLike[str] | ObjectStore,
    key: str,
    *,
    window: int = DEFAULT_IDEMPOTENCY_WINDOW,
    property_name: str = IDEMPOTENCY_KEY,
) -> PriorCommit | None:
    """The newest of the last ``window`` versions whose transaction has ``property_name == key``."""
    store = object_store_for(uri)
    listing = list_versions(store)
    if listing.latest is None:
        return None
    for version in sorted(listing.versions, reverse=True)[: max(int(window), 0)]:
        try:
            txn = load_transaction(store, read_manifest(store, listing.versions[version]))
        except LanceError:
            continue  # an unreadable old transaction cannot hold our key
        if txn is not None and txn.transaction_properties.get(property_name) == key:
            return PriorCommit(version, txn)
    return None


def deletion_file_id(write_id: str, fragment_id: int) -> int:
    """The DeletionFile.id a write uses for a fragment: unique per (write, fragment), findable."""
    digest = hashlib.blake2b(f"{write_id}:{fragment_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


def delete_rows(
    store: ObjectStore,
    fragment: table_pb2.DataFragment,
    offsets: np.ndarray,
    *,
    read_version: int,
    write_id: str,
    deletion_store: ObjectStore | None = None,
) -> tuple[table_pb2.DataFragment | None, int]:
    """Mark physical ``offsets`` of ``fragment`` deleted, on top of its existing deletions
    (read from ``deletion_store`` when they live in another base path).

    Returns ``(updated fragment, newly deleted count)``; the fragment is ``None`` when no live
    row remains (the commit removes it). Nothing is written when nothing new is deleted.
    """
    new = np.unique(np.asarray(offsets, dtype=np.int64))
    if new.size and (new[0] < 0 or new[-1] >= fragment.physical_rows):
        raise InvalidInputError(
            f"row offsets outside fragment {fragment.id} ({fragment.physical_rows} rows)", table=store.uri
        )
    old = (
        read_deletion_file(deletion_store or store, fragment.id, fragment.deletion_file)
        if fragment.HasField("deletion_file")
        else np.empty(0, np.uint32)
    )
    union = np.union1d(old.astype(np.int64), new)
    added = int(union.size - old.size)
    if added == 0:
        return fragment, 0
    if union.size >= fragment.physical_rows:
        return None, added
    bitmap = union.size > BITMAP_THRESHOLD
    pb = table_pb2.DeletionFile(
        file_type=table_pb2.DeletionFile.BITMAP if bitmap else table_pb2.DeletionFile.ARROW_ARRAY,
        read_version=read_version,
        id=deletion_file_id(write_id, fragment.id),
        num_deleted_rows=int(union.size),
    )
    data = encode_bitmap_deletions(union) if bitmap else encode_arrow_deletions(union)
    store.write_bytes(deletion_file_path(fragment.id, pb), data)
    updated = table_pb2.DataFragment()
    updated.CopyFrom(fragment)
    updated.deletion_file.CopyFrom(pb)
    return updated, added


def _referenced(store: ObjectStore, after_version: int) -> set[str]:
    """Table-relative data and deletion file paths of every version newer than ``after_version``."""
    listing = list_versions(store)
    paths: set[str] = set()
    for version, path in listing.versions.items():
        if version <= after_version:
            continue
        for fragment in read_manifest(store, path).manifest.fragments:
            paths.update(f"data/{f.path}" for f in fragment.files)
            if fragment.HasField("deletion_file"):
                paths.add(deletion_file_path(fragment.id, fragment.deletion_file))
    return paths


def discard_uncommitted(
    uri: str | os.PathLike[str] | ObjectStore,
    prefix: str,
    *,
    read_version: int,
    write_id: str | None = None,
    fragment_ids: Iterable[int] = (),
) -> list[str]:
    """Remove a write's files that no manifest after ``read_version`` references.

    Data files (and the write's staged outputs, :func:`fragment_sink.staged_file_name`) are
    found by ``prefix`` (see :func:`fragment_sink.write_prefix`); deletion files
    by the ids :func:`deletion_file_id` derives for ``write_id`` and ``fragment_ids``. Files are
    listed before manifests are read, so a file of a commit that lands meanwhile is kept.
    Returns the removed paths.
    """
    store = object_store_for(uri)
    names = (prefix, STAGED_MARK + prefix)
    candidates = [f"data/{info.base_name}" for info in store.list_dir("data") if info.base_name.startswith(names)]
    if write_id is not None:
        wanted = {f"{fid}-{read_version}-{deletion_file_id(write_id, fid)}" for fid in fragment_ids}
        for info in store.list_dir(DELETIONS_DIR):
            if info.base_name.rsplit(".", 1)[0] in wanted:
                candidates.append(f"{DELETIONS_DIR}/{info.base_name}")
    if not candidates:
        return []
    keep = _referenced(store, read_version)
    removed = []
    for path in candidates:
        if path not in keep:
            try:
                store.delete(path)
                removed.append(path)
            except OSError:
                pass  # best effort: an orphan is harmless and cleanup_old_versions removes it
    return removed


def commit_fragments(
    uri: str | os.PathLike[str] | ObjectStore,
    operation: str,
    *,
    read_version: int,
    fragments: Sequence[FragmentMetadata] = (),
    schema: LanceSchema | None = None,
    removed_fragment_ids: Iterable[int] = (),
    updated_fragments: Sequence[FragmentMetadata] = (),
    affected_rows: Mapping[int, np.ndarray] | None = None,
    properties: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    enable_stable_row_ids: bool = False,
    storage_version: str | None = None,
) -> CommittedVersion:
    """Commit fragments written elsewhere as ONE new version: the driver side of a distributed write.

    ``operation``: ``"append"``, ``"overwrite"`` (``schema``: the new table's), ``"update"``
    (``fragments`` are new rows; ``removed_fragment_ids``/``updated_fragments`` the fragments of
    ``read_version`` that lost rows; ``schema``: the table's, whose fields keep their index
    bitmaps, as in pylance's merge_insert) or ``"merge"`` (the same plus new columns: ``schema``
    is the whole new schema and ``fragments`` hold data for all of it).
    ``affected_rows`` (fragment id -> offsets this update deleted) lets the commit loop rebase
    an update over a concurrent delete/update of the same fragments instead of refusing it.
    """
    if operation not in OPERATIONS:
        raise InvalidInputError(f"operation must be one of {OPERATIONS}, got {operation!r}")
    if operation != OperationKind.APPEND and schema is None:
        raise InvalidInputError(f"an {operation} needs the table schema")
    store = object_store_for(uri)
    if operation == OperationKind.MERGE:
        assert schema is not None
        return commit_with_new_columns(
            store, read_version=read_version, schema=schema, new_fragments=[fragment_to_proto(f) for f in fragments],
            removed_fragment_ids=removed_fragment_ids, updated_fragments=[fragment_to_proto(f) for f in updated_fragments],
            properties=properties, commit_message=commit_message)
    lance_op: LanceOperation.BaseOperation
    if operation == OperationKind.APPEND:
        lance_op = LanceOperation.Append(list(fragments))
    elif operation == OperationKind.OVERWRITE:
        lance_op = LanceOperation.Overwrite(schema, list(fragments))
    else:
        assert schema is not None
        lance_op = LanceOperation.Update(
            removed_fragment_ids=sorted(set(int(i) for i in removed_fragment_ids)),
            updated_fragments=list(updated_fragments), new_fragments=list(fragments),
            fields_for_preserving_frag_bitmap=schema.field_ids())
    props = dict(properties or {})
    if commit_message is not None:
        props[COMMIT_MESSAGE_KEY] = commit_message
    transaction = Transaction(read_version=read_version, operation=lance_op, transaction_properties=props)
    return commit_lance_transaction(store, transaction, enable_stable_row_ids=enable_stable_row_ids,
                                    data_storage_version=storage_version or None,
                                    affected_rows=affected_rows if operation == OperationKind.UPDATE else None)


# -- what tasks send to the driver -------------------------------------------------------------------
def fragment_json(fragment: table_pb2.DataFragment) -> str:
    """What a task reports about a fragment it wrote or changed: pylance's ``FragmentMetadata``
    JSON, the one form fragments travel in (pylance could commit it too)."""
    return json.dumps(fragment_from_proto(fragment).to_json(), separators=(",", ":"))


def schema_to_bytes(schema: LanceSchema) -> bytes:
    """A schema with its field ids, as the driver sends it to the tasks that write files."""
    msg = file_pb2.Schema()
    msg.fields.extend(schema.to_protos())
    for key, value in schema.metadata.items():
        msg.metadata[key] = value if isinstance(value, bytes) else str(value).encode()
    return bytes(msg.SerializeToString())


def schema_from_bytes(data: bytes) -> LanceSchema:
    msg = file_pb2.Schema()
    msg.ParseFromString(data)
    return LanceSchema.from_protos(list(msg.fields), dict(msg.metadata))


def index_segment_to_bytes(segment: Index) -> bytes:
    """An index segment a task built, as it travels to the driver (its manifest-format message)."""
    return bytes(index_to_proto(segment).SerializeToString())


def index_segment_from_bytes(data: bytes) -> Index:
    meta = table_pb2.IndexMetadata()
    meta.ParseFromString(data)
    return index_from_proto(meta)


def check_file_schema(schema: LanceSchema, storage_version: str, *, table: str | None = None) -> None:
    """Refuse, before any task runs, a schema that data files of ``storage_version`` cannot hold."""
    DataFileWriter.check_schema(schema, storage_version, table=table)


if TYPE_CHECKING:
    from lance_format.namespace.tables import TableLocation, locate_table

__all__ = [
    # phase 1 (tasks): write fragments and report them
    "FragmentSink", "new_write_id", "write_prefix", "staged_file_name", "resolve_storage_version", "DATA_DIR",
    "DEFAULT_MAX_ROWS_PER_FILE", "DEFAULT_MAX_BYTES_PER_FILE", "fragment_json", "fragment_from_proto",
    "FragmentMetadata", "schema_to_bytes", "schema_from_bytes", "check_file_schema", "check_batch", "delete_rows",
    "deletion_file_id", "index_segment_to_bytes", "index_segment_from_bytes",
    # phase 2 (driver): commit them as one version, once
    "commit_fragments", "CommittedVersion", "COMMIT_MESSAGE_KEY", "IDEMPOTENCY_KEY", "WRITE_ID_KEY",
    "DEFAULT_IDEMPOTENCY_WINDOW", "PriorCommit", "find_committed_version", "discard_uncommitted", "compact_files",
    "check_index_request",
    # vector indices trained on the driver, built by the tasks
    "check_vector_request", "sample_size", "VectorIndexParams", "Trained", "train_ivf", "normalize_vectors",
    "ProductQuantizer", "ScalarQuantizer",
    # tables, versions and their transactions
    "LanceDataset", "LanceSchema", "DataFragment", "Manifest", "ObjectStore", "object_store_for", "normalize_storage_options", "TableLocation",
    "locate_table", "latest_manifest", "read_manifest", "list_versions", "load_transaction", "operation_name",
    "live_row_count", "has_stable_row_ids", "check_writable", "next_field_id_of",
    # reading: one scan plan, executed per fragment range; change feeds
    "plan_scan", "ScanExecutor", "FragmentRange", "to_expression", "serial_decoding", "ROW_ID", "ROW_ADDRESS",
    "SYSTEM_COLUMNS", "NO_CHANGE_OPERATIONS", "VersionChanges", "plan_version", "require_stable_row_ids",
    "same_last_updated", "ChangeWriter", "change_schema",
]


def __getattr__(name: str) -> Any:
    # the namespace package needs the optional ``namespace`` extra: resolved on first use only,
    # so that importing this module (every Spark job does) never needs it
    if name in ("TableLocation", "locate_table"):
        from lance_format.namespace import tables

        return getattr(tables, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
