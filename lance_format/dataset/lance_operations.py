"""pylance's commit values and their manifest-format form.

``LanceOperation.*`` (dataclasses with pylance's names and constructor arguments),
``Transaction`` and ``Index``, and the conversions between them and the manifest format's
transaction message, both ways, byte for byte as pylance 14 writes them
(:func:`transaction_to_proto` / :func:`transaction_from_proto`). Committing them is
:mod:`lance_format.dataset.transactions_api`.
"""

from __future__ import annotations

import dataclasses
import uuid
import warnings
from abc import ABC
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict

import pyarrow as pa
from google.protobuf import unknown_fields

from lance_format.dataset.fragment_metadata import (
    DataFile,
    FragmentMetadata,
    data_file_from_proto,
    data_file_to_proto,
    fragment_from_proto,
    fragment_to_proto,
)
from lance_format.dataset.overlays import DataOverlayFile, DataOverlayGroup, overlay_from_proto, overlay_to_proto
from lance_format.dataset.update_offsets import decode_offsets, encode_offsets
from lance_format.errors import ArgumentTypeError, InvalidInputError, UnsupportedFeatureError
from lance_format.index.metadata import new_index_metadata
from lance_format.proto import transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.base_paths import new_base_protos
from lance_format.table.transaction import OperationKind, operation_name

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset


def _fragments(value: Any, what: str = "fragments") -> list[FragmentMetadata]:
    if not isinstance(value, list):
        raise ArgumentTypeError(f"{what} must be list[FragmentMetadata], got {type(value)}")
    bad = [f for f in value if not isinstance(f, FragmentMetadata)]
    if bad:
        raise ArgumentTypeError(f"{what} must be list[FragmentMetadata], got {type(bad[0])}")
    return value


class LanceOperation:
    """The operations a :meth:`LanceDataset.commit` can apply (pylance's ``LanceOperation``)."""

    class BaseOperation(ABC):  # noqa: B024 - a marker base, as in pylance
        """Base class of the operations."""

    @dataclass
    class Overwrite(BaseOperation):
        """Create the table or replace its contents: a new schema and new fragments."""

        new_schema: LanceSchema | pa.Schema
        fragments: Iterable[FragmentMetadata]
        initial_bases: list[Any] | None = None

        def __post_init__(self) -> None:
            _fragments(self.fragments)

    @dataclass
    class Append(BaseOperation):
        """Add new fragments (rows) to the table."""

        fragments: Iterable[FragmentMetadata]

        def __post_init__(self) -> None:
            _fragments(self.fragments)

    @dataclass
    class Delete(BaseOperation):
        """Fragments with new deletion files, fragments removed entirely, and the predicate."""

        updated_fragments: Iterable[FragmentMetadata]
        deleted_fragment_ids: Iterable[int]
        predicate: str

        def __post_init__(self) -> None:
            _fragments(self.updated_fragments, "updated_fragments")

    @dataclass
    class Update(BaseOperation):
        """Rows rewritten: fragments removed, updated (new deletion files) and added."""

        removed_fragment_ids: list[int] = dataclasses.field(default_factory=list)
        updated_fragments: list[FragmentMetadata] = dataclasses.field(default_factory=list)
        new_fragments: list[FragmentMetadata] = dataclasses.field(default_factory=list)
        fields_modified: list[int] = dataclasses.field(default_factory=list)
        fields_for_preserving_frag_bitmap: list[int] = dataclasses.field(default_factory=list)
        update_mode: str = ""
        updated_fragment_offsets: dict[int, bytes] | None = None

        def __post_init__(self) -> None:
            _fragments(self.updated_fragments, "updated_fragments")
            _fragments(self.new_fragments, "new_fragments")

    @dataclass
    class Merge(BaseOperation):
        """New columns: every fragment (with its new data files) and the widened schema."""

        fragments: Iterable[FragmentMetadata]
        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

        def __post_init__(self) -> None:
            if isinstance(self.schema, pa.Schema):
                warnings.warn("Passing a pyarrow.Schema to Merge is deprecated. Please use a LanceSchema instead.",
                              DeprecationWarning, stacklevel=3)
            _fragments(self.fragments)

    @dataclass
    class Restore(BaseOperation):
        """Make an old version the newest again."""

        version: int

    @dataclass
    class Clone(BaseOperation):
        """A clone or branch creation (read back from transactions; shallow clones only)."""

        is_shallow: bool
        ref_name: str | None
        ref_version: int
        ref_path: str
        branch_name: str | None

    @dataclass
    class RewriteGroup:
        """Fragments replaced by rewritten ones (compaction)."""

        old_fragments: Iterable[FragmentMetadata]
        new_fragments: Iterable[FragmentMetadata]

    @dataclass
    class RewrittenIndex:
        """An index rewritten along with a compaction."""

        old_id: str
        new_id: str
        new_details_type_url: str
        new_details_value: bytes
        new_index_version: int

    @dataclass
    class Rewrite(BaseOperation):
        """Groups of fragments rewritten into new ones, and the indices rewritten with them."""

        groups: Iterable[LanceOperation.RewriteGroup]
        rewritten_indices: Iterable[LanceOperation.RewrittenIndex]

        def __post_init__(self) -> None:
            frags = [f for g in self.groups for f in list(g.old_fragments) + list(g.new_fragments)]
            _fragments(frags)

    @dataclass
    class CreateIndex(BaseOperation):
        """Index segments added and removed (:class:`Index` values, e.g. from
        ``create_index_uncommitted`` on workers)."""

        new_indices: list[Any]
        removed_indices: list[Any]

    @dataclass
    class DataReplacementGroup:
        """A fragment's data file replaced by a new one holding the same fields."""

        fragment_id: int
        new_file: DataFile

    @dataclass
    class DataReplacement(BaseOperation):
        """Data files replaced in place (carried as data: this engine does not commit it)."""

        replacements: list[LanceOperation.DataReplacementGroup]

    DataOverlayFile = DataOverlayFile
    DataOverlayGroup = DataOverlayGroup

    @dataclass
    class DataOverlay(BaseOperation):
        """Overlay files appended to fragments' overlays (see :mod:`lance_format.dataset.overlays`);
        when several target the same cells, the latest group's values win."""

        groups: list[DataOverlayGroup]

    @dataclass
    class Project(BaseOperation):
        """A new schema made of existing fields (drop, rename or reorder columns)."""

        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False

    @dataclass
    class UpdateMap:
        """Updates of a metadata map: key -> value, or None to remove the key."""

        updates: dict[str, str | None]
        replace: bool = False

    @dataclass
    class UpdateConfig(BaseOperation):
        """Updates of the table config, table metadata, schema metadata or field metadata."""

        config_updates: LanceOperation.UpdateMap | None = None
        table_metadata_updates: LanceOperation.UpdateMap | None = None
        schema_metadata_updates: LanceOperation.UpdateMap | None = None
        field_metadata_updates: dict[int, LanceOperation.UpdateMap] | None = None


@dataclass
class Transaction:
    """A commit's description: the version it was built on, its operation and properties."""

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))
    transaction_properties: dict[str, str] | None = dataclasses.field(default_factory=dict)


class BulkCommitResult(TypedDict):
    dataset: LanceDataset
    merged: Transaction


@dataclass
class IndexFile:
    """A file of an index segment and its size (pylance's ``IndexFile``)."""

    path: str
    size_bytes: int


@dataclass
class Index:
    """An index of the table, as a ``CreateIndex`` operation carries it (pylance's ``Index``)."""

    uuid: str
    name: str
    fields: list[int]
    dataset_version: int
    fragment_ids: Any
    index_version: int
    created_at: datetime | None = None
    base_id: int | None = None
    files: list[Any] | None = None
    index_details: tuple[str, bytes] | None = None
    covering_fields: list[int] = dataclasses.field(default_factory=list)


# -- values <-> the transaction message ----------------------------------------------------------
# pylance 14 writes unnamed varint flags on Merge (field 4) and Project (field 2).
_MERGE_PRESERVES_NULLABILITY = b"\x20\x01"
_PROJECT_PRESERVES_NULLABILITY = b"\x10\x01"
_UPDATE_MODES = {"": 0, "rewrite_rows": 0, "rewrite_columns": 1}


# -- operation -> transaction message ---------------------------------------------------------------
def _schema_protos(schema: Any, current: LanceSchema | None,
                   first_new_id: int | None = None) -> tuple[list, dict[str, bytes]]:
    """Field messages (with ids) of a LanceSchema, or of a pyarrow schema matched to ``current`` by
    name; its new fields get ids from ``first_new_id`` (above every id on disk, as
    ``merge_columns`` gives them)."""
    if isinstance(schema, LanceSchema):
        return schema.to_protos(), dict(schema.metadata)
    if isinstance(schema, pa.Schema):
        if current is None:
            lance_schema = LanceSchema.from_arrow(schema)
        else:
            known = {f.name: f for f in current.fields}
            next_id = [first_new_id if first_new_id is not None else current.max_field_id() + 1]
            fields = []
            for arrow_field in schema:
                if arrow_field.name in known:
                    fields.append(known[arrow_field.name])
                else:
                    new = LanceSchema.from_arrow(pa.schema([arrow_field]), first_id=next_id[0]).fields[0]
                    next_id[0] = max(f.id for f in new.walk()) + 1
                    fields.append(new)
            lance_schema = LanceSchema(fields, {k.decode(): v for k, v in (schema.metadata or {}).items()})
        return lance_schema.to_protos(), dict(lance_schema.metadata)
    raise InvalidInputError(f"a schema must be a LanceSchema or a pyarrow.Schema, got {type(schema).__name__}")


def _set_update_map(target: transaction_pb2.Transaction.UpdateMap, update: LanceOperation.UpdateMap) -> None:
    target.replace = bool(update.replace)
    for key, value in update.updates.items():
        entry = target.update_entries.add(key=key)
        if value is not None:
            entry.value = value


def operation_to_proto(operation: LanceOperation.BaseOperation, txn: transaction_pb2.Transaction,
                       current: LanceSchema | None, first_new_id: int | None = None) -> None:
    """Set ``operation`` on ``txn`` (``current``: the table's schema, to give pyarrow fields ids;
    ``first_new_id``: the id of a field new to the table)."""
    L = LanceOperation
    if isinstance(operation, L.Overwrite):
        fragments = list(operation.fragments)
        if any(f.deletion_file is not None for f in fragments):
            raise InvalidInputError("an Overwrite cannot carry fragments with deletion files; commit deletions "
                                    "with LanceOperation.Delete")
        body = txn.overwrite
        body.SetInParent()
        fields, metadata = _schema_protos(operation.new_schema, None)
        body.schema.extend(fields)
        body.schema_metadata.update(metadata)
        body.fragments.extend(fragment_to_proto(f) for f in fragments)
        if operation.initial_bases:  # bases the new table registers (ids the fragments' files name)
            body.initial_bases.extend(new_base_protos(list(operation.initial_bases), [], table=""))
    elif isinstance(operation, L.Append):
        txn.append.SetInParent()
        txn.append.fragments.extend(fragment_to_proto(f) for f in operation.fragments)
    elif isinstance(operation, L.Delete):
        body = txn.delete
        body.SetInParent()
        body.updated_fragments.extend(fragment_to_proto(f) for f in operation.updated_fragments)
        body.deleted_fragment_ids.extend(int(i) for i in operation.deleted_fragment_ids)
        body.predicate = operation.predicate
    elif isinstance(operation, L.Update):
        if operation.update_mode not in _UPDATE_MODES:
            raise InvalidInputError(f"update_mode must be one of {sorted(_UPDATE_MODES)}, got "
                                    f"{operation.update_mode!r}")
        update = txn.update
        update.SetInParent()
        update.removed_fragment_ids.extend(int(i) for i in operation.removed_fragment_ids)
        update.updated_fragments.extend(fragment_to_proto(f) for f in operation.updated_fragments)
        update.new_fragments.extend(fragment_to_proto(f) for f in operation.new_fragments)
        update.fields_modified.extend(operation.fields_modified)
        update.fields_for_preserving_frag_bitmap.extend(operation.fields_for_preserving_frag_bitmap)
        update.update_mode = _UPDATE_MODES[operation.update_mode]  # type: ignore[assignment]
        update.MergeFromString(encode_offsets(operation.updated_fragment_offsets))
    elif isinstance(operation, L.Merge):
        merge = txn.merge
        merge.SetInParent()
        fields, metadata = _schema_protos(operation.schema, current, first_new_id)
        merge.schema.extend(fields)
        merge.schema_metadata.update(metadata)
        merge.fragments.extend(fragment_to_proto(f) for f in operation.fragments)
        if operation.preserves_nullability:
            merge.MergeFromString(_MERGE_PRESERVES_NULLABILITY)
    elif isinstance(operation, L.Restore):
        txn.restore.version = int(operation.version)
    elif isinstance(operation, L.Rewrite):
        if list(operation.rewritten_indices):
            raise UnsupportedFeatureError("Rewrite with rewritten indices is not supported by this engine")
        rewrite = txn.rewrite
        rewrite.SetInParent()
        for group in operation.groups:
            pb = rewrite.groups.add()
            pb.old_fragments.extend(fragment_to_proto(f) for f in group.old_fragments)
            pb.new_fragments.extend(fragment_to_proto(f) for f in group.new_fragments)
    elif isinstance(operation, L.Project):
        project = txn.project
        project.SetInParent()
        fields, _metadata = _schema_protos(operation.schema, current)
        project.schema.extend(fields)
        if operation.preserves_nullability:
            project.MergeFromString(_PROJECT_PRESERVES_NULLABILITY)
    elif isinstance(operation, L.UpdateConfig):
        config = txn.update_config
        config.SetInParent()
        for name in ("config_updates", "table_metadata_updates", "schema_metadata_updates"):
            value = getattr(operation, name)
            if value is not None:
                _set_update_map(getattr(config, name), value)
        for field_id, value in (operation.field_metadata_updates or {}).items():
            _set_update_map(config.field_metadata_updates[int(field_id)], value)
    elif isinstance(operation, L.DataReplacement):
        body = txn.data_replacement
        body.SetInParent()
        for replacement in operation.replacements:
            body.replacements.add(fragment_id=replacement.fragment_id,
                                  new_file=data_file_to_proto(replacement.new_file))
    elif isinstance(operation, L.DataOverlay):
        body = txn.data_overlay
        body.SetInParent()
        for overlay_group in operation.groups:
            if not isinstance(overlay_group, DataOverlayGroup):
                raise ArgumentTypeError(f"DataOverlay groups must be LanceOperation.DataOverlayGroup, got "
                                        f"{type(overlay_group).__name__}")
            pb = body.groups.add(fragment_id=int(overlay_group.fragment_id))
            for overlay in overlay_group.overlays:
                pb.overlays.add().CopyFrom(overlay_to_proto(dataclasses.replace(overlay, committed_version=None)))
    elif isinstance(operation, L.CreateIndex):
        body = txn.create_index
        body.SetInParent()
        for index in operation.new_indices:
            body.new_indices.add().CopyFrom(index_to_proto(index))
        for index in operation.removed_indices:
            body.removed_indices.add().CopyFrom(index_to_proto(index))
    elif isinstance(operation, L.Clone):
        raise UnsupportedFeatureError(f"committing a {type(operation).__name__} operation is not supported by "
                                      "this engine")
    else:
        raise InvalidInputError(f"operation must be a LanceOperation.BaseOperation or Transaction, got "
                                f"{type(operation)}")


# -- transaction message -> operation ---------------------------------------------------------------
def _frags(pbs: Iterable[Any]) -> list[FragmentMetadata]:
    return [fragment_from_proto(pb) for pb in pbs]


def _update_map(pb: transaction_pb2.Transaction.UpdateMap) -> LanceOperation.UpdateMap:
    return LanceOperation.UpdateMap({e.key: e.value if e.HasField("value") else None for e in pb.update_entries},
                                    pb.replace)


def _preserves(body: Any, field_number: int) -> bool:
    """Whether pylance's unnamed ``preserves_nullability`` flag (an unknown varint field) is set."""
    return any(f.field_number == field_number and f.data == 1 for f in unknown_fields.UnknownFieldSet(body))


def operation_from_proto(txn: transaction_pb2.Transaction) -> LanceOperation.BaseOperation:
    """The operation of a transaction message (a bare ``BaseOperation`` for kinds pylance has no
    class for, such as ReserveFragments, as pylance does)."""
    L = LanceOperation
    kind = operation_name(txn)
    if kind == OperationKind.OVERWRITE:
        o = txn.overwrite
        return L.Overwrite(LanceSchema.from_protos(list(o.schema), dict(o.schema_metadata)), _frags(o.fragments))
    if kind == OperationKind.APPEND:
        return L.Append(_frags(txn.append.fragments))
    if kind == OperationKind.DELETE:
        d = txn.delete
        return L.Delete(_frags(d.updated_fragments), list(d.deleted_fragment_ids), d.predicate)
    if kind == OperationKind.UPDATE:
        u = txn.update
        return L.Update(list(u.removed_fragment_ids), _frags(u.updated_fragments), _frags(u.new_fragments),
                        list(u.fields_modified), list(u.fields_for_preserving_frag_bitmap),
                        "rewrite_columns" if u.update_mode == 1 else "rewrite_rows",
                        updated_fragment_offsets=decode_offsets(u))
    if kind == OperationKind.MERGE:
        m = txn.merge
        return L.Merge(_frags(m.fragments), LanceSchema.from_protos(list(m.schema), dict(m.schema_metadata)),
                       _preserves(m, 4))
    if kind == OperationKind.RESTORE:
        return L.Restore(txn.restore.version)
    if kind == OperationKind.REWRITE:
        groups = [L.RewriteGroup(_frags(g.old_fragments), _frags(g.new_fragments)) for g in txn.rewrite.groups]
        rewritten = [L.RewrittenIndex(_uuid(r.old_id), _uuid(r.new_id), r.new_index_details.type_url,
                                      r.new_index_details.value, r.new_index_version)
                     for r in txn.rewrite.rewritten_indices]
        return L.Rewrite(groups, rewritten)
    if kind == OperationKind.PROJECT:
        return L.Project(LanceSchema.from_protos(list(txn.project.schema), {}),
                         _preserves(txn.project, 2))
    if kind == OperationKind.UPDATE_CONFIG:
        c = txn.update_config
        return L.UpdateConfig(
            _update_map(c.config_updates) if c.HasField("config_updates") else None,
            _update_map(c.table_metadata_updates) if c.HasField("table_metadata_updates") else None,
            _update_map(c.schema_metadata_updates) if c.HasField("schema_metadata_updates") else None,
            {int(k): _update_map(v) for k, v in c.field_metadata_updates.items()} or None,
        )
    if kind == OperationKind.DATA_REPLACEMENT:
        return L.DataReplacement([L.DataReplacementGroup(r.fragment_id, data_file_from_proto(r.new_file))
                                  for r in txn.data_replacement.replacements])
    if kind == OperationKind.DATA_OVERLAY:
        return L.DataOverlay([L.DataOverlayGroup(g.fragment_id, [overlay_from_proto(o) for o in g.overlays])
                              for g in txn.data_overlay.groups])
    if kind == OperationKind.CREATE_INDEX:
        ci = txn.create_index
        return L.CreateIndex([index_from_proto(i) for i in ci.new_indices], [index_from_proto(i) for i in ci.removed_indices])
    if kind == OperationKind.CLONE:
        c = txn.clone
        return L.Clone(c.is_shallow, c.ref_name if c.HasField("ref_name") else None, c.ref_version, c.ref_path,
                       c.branch_name if c.HasField("branch_name") else None)
    return L.BaseOperation()


def _uuid(pb: Any) -> str:
    return str(uuid.UUID(bytes=bytes(pb.uuid))) if len(pb.uuid) == 16 else ""


def index_to_proto(index: Any) -> Any:
    """The ``IndexMetadata`` message of a pylance-style :class:`Index` value."""
    if not isinstance(index, Index) and not all(hasattr(index, a) for a in ("uuid", "name", "fields")):
        raise ArgumentTypeError(f"CreateIndex indices must be lance Index values, got {type(index).__name__}")
    type_url, details = index.index_details if index.index_details is not None else ("", b"")
    files = [(f.path, f.size_bytes) if hasattr(f, "path") else (str(f[0]), int(f[1])) for f in index.files or []]
    created = index.created_at
    meta = new_index_metadata(
        index_uuid=str(index.uuid), name=index.name, field_ids=index.fields, dataset_version=index.dataset_version,
        fragment_ids=index.fragment_ids or [], type_url=type_url, details=details, index_version=index.index_version,
        files=files, base_id=index.base_id,
        created_at_ms=int(created.timestamp() * 1000) if created is not None else None)
    if index.index_details is None:
        meta.ClearField("index_details")
    return meta


def index_from_proto(pb: Any) -> Index:
    from pyroaring import BitMap

    created = None
    if pb.HasField("created_at"):
        created = datetime.fromtimestamp(pb.created_at / 1000, tz=UTC)
    return Index(uuid=_uuid(pb.uuid), name=pb.name, fields=list(pb.fields), dataset_version=pb.dataset_version,
                 fragment_ids=set(BitMap.deserialize(bytes(pb.fragment_bitmap))) if pb.fragment_bitmap else set(), index_version=pb.index_version, created_at=created,
                 base_id=pb.base_id if pb.HasField("base_id") else None,
                 files=[IndexFile(f.path, f.size_bytes) for f in pb.files] or None,
                 index_details=(pb.index_details.type_url, pb.index_details.value)
                 if pb.HasField("index_details") else None)


def transaction_from_proto(txn: transaction_pb2.Transaction) -> Transaction:
    """pylance's view of a transaction message."""
    return Transaction(read_version=txn.read_version, operation=operation_from_proto(txn),
                       uuid=txn.uuid, transaction_properties=dict(txn.transaction_properties))


def transaction_to_proto(transaction: Transaction, current: LanceSchema | None,
                         first_new_id: int | None = None) -> transaction_pb2.Transaction:
    txn = transaction_pb2.Transaction(read_version=int(transaction.read_version), uuid=transaction.uuid)
    txn.transaction_properties.update({str(k): str(v) for k, v in (transaction.transaction_properties or {}).items()})
    operation_to_proto(transaction.operation, txn, current, first_new_id)
    return txn


# -- commit ---------------------------------------------------------------------------------------
