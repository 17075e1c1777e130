"""Dictionary values of legacy (0.1) tables, which live in every manifest file.

A legacy table's dictionary fields keep their values outside the data files: each manifest
file starts with them (a var-binary page, or a plain page for integer values) and the
manifest's ``Field.dictionary`` gives their offset and count. Every new manifest must write
them again; a commit carries them over from the manifest it builds on.
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.encodings.legacy_v0_1.encode import encode_values
from lance_format.errors import UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2

LEGACY_STORAGE = "0.1"


def _dictionary_fields(manifest: table_pb2.Manifest) -> list:
    if manifest.data_format.version != LEGACY_STORAGE:
        return []
    return [f for f in manifest.fields if f.logical_type.startswith("dict:")]


def carried_dictionaries(store: ObjectStore, sources: list[tuple[str, table_pb2.Manifest]],
                         new: table_pb2.Manifest) -> dict[int, pa.Array]:
    """Dictionary values (by field id) the manifest ``new`` must hold, read from ``sources``
    (path and manifest of the versions it is built from); empty when it needs none."""
    if not _dictionary_fields(new):
        return {}
    from lance_format.file.legacy_v0_1 import manifest_dictionaries

    values: dict[int, pa.Array] = {}
    for path, manifest in sources:
        if _dictionary_fields(manifest):
            for field_id, array in manifest_dictionaries(store, path, manifest.fields).items():
                values.setdefault(field_id, array)
    return values


def dictionary_prefix(manifest: table_pb2.Manifest, dictionaries: dict[int, pa.Array] | None) -> bytes:
    """The bytes that open a legacy manifest file: its dictionary values. Sets each dictionary
    field's ``Field.dictionary`` (offset, count) in ``manifest`` to point at them."""
    out = bytearray()
    for field in _dictionary_fields(manifest):
        values = (dictionaries or {}).get(field.id)
        if values is None:
            raise UnsupportedFeatureError(
                f"the dictionary values of legacy field {field.name!r} are unknown, so its manifest cannot be written",
                column=field.name,
            )
        offset, data = encode_values(values, len(out))
        out += data
        field.dictionary.offset = offset
        field.dictionary.length = len(values)
    return bytes(out)


def latest_table_dictionaries(store: ObjectStore) -> dict[int, pa.Array]:
    """Dictionary values of the legacy table at ``store`` (its latest manifest), by field id."""
    from lance_format.file.legacy_v0_1 import manifest_dictionaries
    from lance_format.table.commit import latest_manifest  # commit imports this module

    latest = latest_manifest(store)
    if latest is None or latest[1].manifest.data_format.version != "0.1":
        return {}
    path, manifest_file = latest
    return manifest_dictionaries(store, path, manifest_file.manifest.fields)


__all__ = ["carried_dictionaries", "dictionary_prefix", "latest_table_dictionaries", "LEGACY_STORAGE"]
