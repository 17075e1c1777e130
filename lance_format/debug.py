"""pylance's ``lance.debug``: human-readable dumps of a table's schema, manifest, fragments and
transactions, in the layout pylance prints (Rust's pretty ``Debug`` form: ``Name {`` / ``field:
value,`` / ``}`` with four-space indents), so tools that grep these dumps keep working.

The dumps are for people and tests, not a stable interface (in pylance neither); details the
engine does not track (e.g. Rust-side caches) are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from lance_format.proto import table_pb2
from lance_format.rust_debug import NONE as _NONE
from lance_format.rust_debug import Struct as _Struct
from lance_format.rust_debug import Tuple as _Tuple
from lance_format.rust_debug import Unit as _Unit
from lance_format.rust_debug import camel as _camel
from lance_format.rust_debug import render as _render
from lance_format.rust_debug import some as _some

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment_metadata import FragmentMetadata
    from lance_format.schema import LanceField, LanceSchema

_ENCODINGS = {0: _NONE, 1: _some(_Unit("Plain")), 2: _some(_Unit("VarBinary")), 3: _some(_Unit("Dictionary"))}


def _field(field: LanceField) -> _Struct:
    return _Struct("Field", [
        ("name", field.name), ("id", field.id), ("parent_id", field.parent_id),
        ("logical_type", _Tuple("LogicalType", [field.logical_type])),
        ("metadata", {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                      for k, v in field.metadata.items()}),
        ("encoding", _ENCODINGS.get(field.encoding, _NONE)), ("nullable", field.nullable),
        ("children", [_field(c) for c in field.children]), ("dictionary", _NONE),
        ("unenforced_primary_key_position", _NONE), ("unenforced_clustering_key_position", _NONE),
    ])


def _schema(fields: list[LanceField], metadata: dict) -> _Struct:
    return _Struct("Schema", [
        ("fields", [_field(f) for f in fields]),
        ("metadata", {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for k, v in metadata.items()}),
    ])


def _project(schema: LanceSchema, ids: set[int]) -> list[LanceField]:
    """The fields of ``schema`` holding any of ``ids`` (parents kept for nested ones)."""
    kept = []
    for field in schema.fields:
        subtree = {f.id for f in field.walk()} if hasattr(field, "walk") else {field.id}
        if subtree & ids:
            kept.append(field)
    return kept


def format_schema(dataset: LanceDataset) -> str:
    """The table's schema, as pylance's ``format_schema`` prints it."""
    schema = dataset.lance_schema
    return _render(_schema(list(schema.fields), dict(schema.metadata)))


def format_fragment(fragment: FragmentMetadata, dataset: LanceDataset) -> str:
    """One fragment with, per data file, the part of the table schema it holds."""
    schema = dataset.lance_schema
    deletion = fragment.deletion_file
    files = [
        _Struct("PrettyPrintableDataFile", [
            ("path", f.path), ("fields", list(f.fields)), ("column_indices", list(f.column_indices)),
            ("schema", _schema(_project(schema, set(f.fields)), {})),
            ("major_version", f.file_major_version), ("minor_version", f.file_minor_version),
        ])
        for f in fragment.files
    ]
    deletion_value = _NONE if deletion is None else _some(_Struct("DeletionFile", [
        ("read_version", deletion.read_version), ("id", deletion.id),
        ("file_type", _Unit("Bitmap" if deletion.file_type == "bitmap" else "Array")),
        ("num_deleted_rows", _some(deletion.num_deleted_rows)), ("base_id", _some(deletion.base_id)),
    ]))
    return _render(_Struct("PrettyPrintableFragment", [
        ("id", fragment.id), ("files", files), ("deletion_file", deletion_value),
        ("physical_rows", _some(fragment.physical_rows)),
    ]))


def _message(message: Message, name: str | None = None) -> _Struct:
    """A protobuf message as a struct of its set fields (generic form for manifests and
    transactions)."""
    fields: list[tuple[str, Any]] = []
    for descriptor, value in message.ListFields():
        fields.append((descriptor.name, _proto_value(descriptor, value)))
    if isinstance(message, table_pb2.DataFragment) and not message.id:
        fields.insert(0, ("id", 0))  # proto3 leaves a zero id out; the fragment's id matters here
    return _Struct(name or message.DESCRIPTOR.name, fields)


def _proto_value(descriptor: Any, value: Any) -> Any:
    if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
        return {k: (_message(v) if isinstance(v, Message) else v) for k, v in value.items()}
    if descriptor.is_repeated:
        return [_message(v, _rust_name(v)) if isinstance(v, Message) else v for v in value]
    if isinstance(value, Message):
        return _message(value, _rust_name(value))
    if descriptor.enum_type is not None:
        return _Unit(_camel(descriptor.enum_type.values_by_number[value].name.lower()))
    return value


def _rust_name(message: Message) -> str:
    return {"DataFragment": "Fragment"}.get(message.DESCRIPTOR.name, message.DESCRIPTOR.name)


def format_manifest(dataset: LanceDataset) -> str:
    """The manifest of the dataset's version: schema, version, writer and fragments."""
    manifest: table_pb2.Manifest = dataset.manifest
    schema = dataset.lance_schema
    writer = manifest.writer_version if manifest.HasField("writer_version") else None
    return _render(_Struct("Manifest", [
        ("schema", _schema(list(schema.fields), dict(schema.metadata))),
        ("version", manifest.version),
        ("branch", _some(manifest.branch if manifest.HasField("branch") else None)),
        ("writer_version", _NONE if writer is None else _some(_Struct("WriterVersion", [
            ("library", writer.library), ("version", writer.version),
            ("prerelease", _some(writer.prerelease if writer.HasField("prerelease") else None)),
            ("build_metadata", _some(writer.build_metadata if writer.HasField("build_metadata") else None)),
        ]))),
        ("fragments", [_message(f, "Fragment") for f in manifest.fragments]),
        ("version_aux_data", manifest.version_aux_data),
        ("index_section", _some(manifest.index_section if manifest.HasField("index_section") else None)),
        ("timestamp_nanos", manifest.timestamp.seconds * 1_000_000_000 + manifest.timestamp.nanos),
        ("tag", _some(manifest.tag or None)),
        ("reader_feature_flags", manifest.reader_feature_flags),
        ("writer_feature_flags", manifest.writer_feature_flags),
        ("max_fragment_id", _some(manifest.max_fragment_id if manifest.HasField("max_fragment_id") else None)),
        ("transaction_file", _some(manifest.transaction_file or None)),
        ("next_row_id", manifest.next_row_id),
        ("config", dict(manifest.config)),
        ("table_metadata", dict(manifest.table_metadata)),
    ]))


def list_transactions(dataset: LanceDataset, max_transactions: int = 10) -> list[str]:
    """The transactions of the newest ``max_transactions`` versions up to the dataset's, newest
    first, each as ``Transaction { read_version, uuid, operation: <Kind> {...}, ... }``."""
    out: list[str] = []
    version = dataset.version
    while version >= 1 and len(out) < max_transactions:
        txn = dataset.read_transaction_message(version)
        version -= 1
        if txn is None:
            continue
        kind = txn.WhichOneof("operation")
        operation = _message(getattr(txn, kind), _camel(kind)) if kind else _NONE
        out.append(_render(_Struct("Transaction", [
            ("read_version", txn.read_version), ("uuid", txn.uuid), ("operation", operation),
            ("tag", _some(txn.tag or None)),
            ("transaction_properties", _some(dict(txn.transaction_properties)
                                             if txn.transaction_properties else None)),
        ])))
    return out


__all__ = ["format_schema", "format_fragment", "format_manifest", "list_transactions"]
