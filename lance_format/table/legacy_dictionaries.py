"""Dictionary values of legacy (0.1) tables, which live in every manifest file.

A legacy table's dictionary fields keep their values outside the data files: each manifest
file starts with them (a var-binary page, or a plain page for integer values) and the
manifest's ``Field.dictionary`` gives their offset and count. Every new manifest must write
them again; a commit carries them over from the manifest it builds on, extended by what its new
data files hold: legacy files hold the values they were written against, which writers only ever
extend (a null value for an append's null rows; a new table's whole dictionary), so the longest
holds them all and the others must be its prefixes. A table's first manifest (and an
overwrite's) takes them from its files alone.
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.encodings.legacy_v0_1.encode import encode_values
from lance_format.errors import CommitConflictError, UnsupportedFeatureError
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
    (path and manifest of the versions it is built from), else from its data files; empty when
    it needs none."""
    if not _dictionary_fields(new):
        return {}
    from lance_format.file.legacy_v0_1 import manifest_dictionaries

    values: dict[int, pa.Array] = {}
    for path, manifest in sources:
        if _dictionary_fields(manifest):
            for field_id, array in manifest_dictionaries(store, path, manifest.fields).items():
                values.setdefault(field_id, array)
    known_files = {(f.base_id if f.HasField("base_id") else None, f.path)
                   for _, manifest in sources for fragment in manifest.fragments for f in fragment.files}
    _extend_from_files(store, new, {f.id for f in _dictionary_fields(new)}, known_files, values)
    return values


def _extend_from_files(store: ObjectStore, manifest: table_pb2.Manifest, wanted: set[int],
                       known_files: set, values: dict[int, pa.Array]) -> None:
    """Extend ``values`` by the dictionaries the manifest's files not in ``known_files`` hold."""
    from lance_format.file.legacy_v0_1 import LegacyFileReader
    from lance_format.table.base_paths import BaseStores

    bases = BaseStores(store, manifest)
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            ids = [f for f in data_file.fields if f >= 0]
            key = (data_file.base_id if data_file.HasField("base_id") else None, data_file.path)
            if key in known_files or not wanted.intersection(ids):
                continue
            file_store, path = bases.data_file(data_file)
            with LegacyFileReader(file_store, path, field_ids=(min(ids), max(ids)),
                                  size=data_file.file_size_bytes or None) as reader:
                in_file = reader.file_dictionaries()
            for field_id in wanted.intersection(in_file):
                found, known = in_file[field_id], values.get(field_id)
                shorter, longer = (found, known) if known is not None and len(known) >= len(found) else (known, found)
                if shorter is not None and not longer.slice(0, len(shorter)).equals(shorter):
                    raise CommitConflictError(
                        f"the dictionary of field id {field_id} in a new data file is not the table's "
                        "(another write changed it meanwhile): write the data again", table=store.uri, path=path)
                values[field_id] = longer


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
