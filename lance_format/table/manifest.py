"""Manifest files: the byte layout official Lance reads and writes.

Layout (all chunks are ``u32 LE length | protobuf``, no padding)::

    [IndexSection chunk]     only when the table has indices
    [Transaction chunk]      the commit's transaction, identical to its ``_transactions/*.txn`` file
    Manifest chunk
    i64 LE offset of the Manifest chunk | u16 0 | u16 2 | b"LANC"

``Manifest.index_section`` and ``Manifest.transaction_section`` hold the offsets of the chunks'
length prefixes. Messages are edited in place rather than rebuilt, so protobuf fields this
engine does not model survive a read-modify-write.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from lance_format.errors import CorruptFileError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2, transaction_pb2
from lance_format.schema.logical_types import is_nested_logical_type
from lance_format.table.legacy_dictionaries import dictionary_prefix
from lance_format.table.legacy_manifest import repair_old_manifest

MAGIC = b"LANC"
MANIFEST_MAJOR = 0
MANIFEST_MINOR = 2
_TAIL = struct.Struct("<qHH4s")


@dataclass
class ManifestFile:
    """A decoded manifest file."""

    manifest: table_pb2.Manifest
    transaction: transaction_pb2.Transaction | None
    index_section: table_pb2.IndexSection | None
    size: int


def _parse(message_type, data: bytes, what: str, *, table: str, path: str):
    message = message_type()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"cannot decode the {what}: {exc}", table=table, path=path) from exc
    return message


def _chunk(data: bytes, offset: int, what: str, *, table: str, path: str) -> bytes:
    if offset < 0 or offset + 4 > len(data):
        raise CorruptFileError(f"{what} offset {offset} is outside the file", table=table, path=path)
    (length,) = struct.unpack_from("<I", data, offset)
    end = offset + 4 + length
    if end > len(data):
        raise CorruptFileError(f"{what} of {length} bytes runs past the end of the file", table=table, path=path)
    return data[offset + 4 : end]


def decode_manifest(data: bytes, *, table: str, path: str) -> ManifestFile:
    """Decode a manifest file's bytes, validating every offset before use."""
    if len(data) < _TAIL.size:
        raise CorruptFileError(f"manifest is truncated ({len(data)} bytes)", table=table, path=path)
    position, _major, _minor, magic = _TAIL.unpack_from(data, len(data) - _TAIL.size)
    if magic != MAGIC:
        raise CorruptFileError(f"manifest does not end with the LANC magic (found {magic!r})", table=table, path=path)
    body = _chunk(data, position, "manifest", table=table, path=path)
    if position + 4 + len(body) != len(data) - _TAIL.size:
        raise CorruptFileError("manifest length prefix does not match the file size", table=table, path=path)
    manifest = _parse(table_pb2.Manifest, body, "manifest", table=table, path=path)
    _check_field_tree(manifest, table=table, path=path)

    transaction = None
    txn_offset = _transaction_offset(manifest)
    if txn_offset is not None:
        raw = _chunk(data, txn_offset, "inline transaction", table=table, path=path)
        transaction = _parse(transaction_pb2.Transaction, raw, "inline transaction", table=table, path=path)

    index_section = None
    if manifest.HasField("index_section"):
        raw = _chunk(data, manifest.index_section, "index section", table=table, path=path)
        index_section = _parse(table_pb2.IndexSection, raw, "index section", table=table, path=path)
    return ManifestFile(manifest, transaction, index_section, len(data))


def _check_field_tree(manifest: table_pb2.Manifest, *, table: str, path: str) -> None:
    """The schema's fields form a tree whose shape fits their types.

    A damaged parent id would otherwise move a field under another column (a struct silently
    loses a field, an integer column gains a child): refuse the manifest instead.
    """
    kinds: dict[int, str] = {}
    children: dict[int, int] = {}
    for field in manifest.fields:
        if field.id in kinds or field.id < 0:
            raise CorruptFileError(f"manifest schema has an invalid or repeated field id {field.id}",
                                   table=table, path=path)
        if field.parent_id != -1:
            parent = kinds.get(field.parent_id)
            if parent is None or not is_nested_logical_type(parent):
                raise CorruptFileError(
                    f"manifest schema puts field {field.name!r} (id {field.id}) under "
                    + (f"unknown parent id {field.parent_id}" if parent is None
                       else f"field id {field.parent_id} of type {parent!r}, which has no child fields"),
                    table=table, path=path,
                )
            children[field.parent_id] = children.get(field.parent_id, 0) + 1
        kinds[field.id] = field.logical_type
    for field_id, count in children.items():
        if kinds[field_id] != "struct" and count != 1:
            raise CorruptFileError(
                f"manifest schema gives the {kinds[field_id]!r} field id {field_id} {count} child fields",
                table=table, path=path,
            )


def _transaction_offset(manifest: table_pb2.Manifest) -> int | None:
    # pylance 14 writes field 23; older writers and the published spec use field 21.
    if manifest.HasField("transaction_section"):
        return manifest.transaction_section
    if manifest.HasField("transaction_section_deprecated"):
        return manifest.transaction_section_deprecated
    return None


def encode_manifest(
    manifest: table_pb2.Manifest,
    transaction: transaction_pb2.Transaction | None = None,
    index_section: table_pb2.IndexSection | None = None,
    dictionaries: dict | None = None,
) -> bytes:
    """Serialize a manifest file; sets the section offsets on ``manifest`` in place.

    ``dictionaries``: values of a legacy (0.1) table's dictionary fields, by field id; legacy
    manifest files start with them (see legacy_dictionaries).
    """
    prefix = dictionary_prefix(manifest, dictionaries)
    parts: list[bytes] = [prefix]
    offset = len(prefix)
    manifest.ClearField("index_section")
    manifest.ClearField("transaction_section")
    manifest.ClearField("transaction_section_deprecated")
    if index_section is not None and len(index_section.indices) > 0:
        raw = index_section.SerializeToString()
        manifest.index_section = offset
        parts.append(struct.pack("<I", len(raw)) + raw)
        offset += 4 + len(raw)
    if transaction is not None:
        raw = transaction.SerializeToString()
        manifest.transaction_section = offset
        parts.append(struct.pack("<I", len(raw)) + raw)
        offset += 4 + len(raw)
    raw = manifest.SerializeToString()
    parts.append(struct.pack("<I", len(raw)) + raw)
    parts.append(_TAIL.pack(offset, MANIFEST_MAJOR, MANIFEST_MINOR, MAGIC))
    return b"".join(parts)


def read_manifest(store: ObjectStore, path: str, *, repair: bool = True,
                  read_bytes: Callable[[ObjectStore, str], bytes] | None = None) -> ManifestFile:
    """Read a manifest file; ``repair`` completes manifests of early releases (see legacy_manifest).
    ``read_bytes``: where the file's bytes come from (a session's cache), the store if None."""
    data = read_bytes(store, path) if read_bytes is not None else store.read_bytes(path)
    manifest_file = decode_manifest(data, table=store.uri, path=path)
    if repair:
        repair_old_manifest(store, manifest_file.manifest)
    return manifest_file
