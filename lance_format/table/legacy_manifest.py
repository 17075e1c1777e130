"""Manifests written by early Lance releases, brought up to date in memory when read.

Manifests written before ``writer_version`` existed (Lance < 0.8.x) may lack
``DataFragment.physical_rows`` or carry a wrong value (a Lance 0.8.0 migration stored the live
row count there). Official Lance trusts ``physical_rows`` only when the manifest has a writer
version and the value is non-zero; otherwise it asks the fragment's first data file. Doing the
same when a manifest is read makes every later count, read and commit see the true value (a
commit then persists it, as official Lance's manifest migration does).

Manifests older than ``data_format`` (Lance < 0.16) get the storage version official Lance
infers: the version of the first data file, else 2.x if the writer set the deprecated "v2
format" flag, else legacy 0.1.
"""

from __future__ import annotations

import warnings

import numpy as np

from lance_format.errors import CorruptFileError, LanceError
from lance_format.file.legacy_v0_1 import LegacyFileReader, is_legacy_version
from lance_format.file.reader import LanceFileReader
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.table.naming import data_file_path

_FLAG_USE_V2_FORMAT_DEPRECATED = 4
_STABLE_VERSION = "2.2"  # what official Lance (pylance 14) calls the stable file version


def repair_old_manifest(store: ObjectStore, manifest: table_pb2.Manifest) -> None:
    """Fill in (in place) what official Lance derives for manifests of early releases."""
    if not manifest.HasField("data_format"):
        manifest.data_format.file_format = "lance"
        manifest.data_format.version = _inferred_storage_version(manifest)
    repair_row_counts(store, manifest)


def _file_version(data_file: table_pb2.DataFile) -> str:
    major, minor = data_file.file_major_version, data_file.file_minor_version
    if is_legacy_version(major, minor):
        return "0.1"
    return "2.0" if (major, minor) == (0, 3) else f"{major}.{minor}"


def repair_legacy_storage_version(manifest: table_pb2.Manifest) -> None:
    """A new version of a table whose manifest says storage version 0.1 while its data files are
    all 2.x (written so by Lance 0.16) says their version instead, as official Lance repairs it;
    a table holding both 0.1 and 2.x files is refused (roll back to an earlier version).

    Raises
    ------
    CorruptFileError
        The data files have different versions.
    """
    if manifest.data_format.version not in ("0.1", "legacy"):
        return
    found = sorted({_file_version(f) for fragment in manifest.fragments for f in fragment.files})
    if len(found) > 1:
        raise CorruptFileError("The dataset contains a mixture of file versions. You will need to rollback to an "
                               f"earlier version: All data files must have the same version. Detected both "
                               f"{found[-1]} and {found[0]}")
    if found and found[0] != "0.1":
        warnings.warn(f"Data storage version {manifest.data_format.version} is less than the actual file version "
                      f"{found[0]}. This has been automatically updated.", stacklevel=3)
        manifest.data_format.version = found[0]


def _inferred_storage_version(manifest: table_pb2.Manifest) -> str:
    for fragment in manifest.fragments:
        if fragment.files:
            first = fragment.files[0]
            major, minor = first.file_major_version, first.file_minor_version
            if is_legacy_version(major, minor):
                return "0.1"
            return "2.0" if (major, minor) == (0, 3) else f"{major}.{minor}"
    if manifest.writer_feature_flags & _FLAG_USE_V2_FORMAT_DEPRECATED:
        return _STABLE_VERSION
    return "0.1"


def repair_row_counts(store: ObjectStore, manifest: table_pb2.Manifest) -> None:
    """Fill in (in place) the physical row counts official Lance would read from data files."""
    trusted = manifest.HasField("writer_version")
    for fragment in manifest.fragments:
        if (trusted and fragment.physical_rows > 0) or not fragment.files:
            continue
        rows = _file_rows(store, fragment.files[0])
        if rows is not None:
            fragment.physical_rows = rows


def _file_rows(store: ObjectStore, data_file: table_pb2.DataFile) -> int | None:
    """Rows of a data file; an unreadable file raises (a silent 0 would undercount the table)."""
    # imported here: the file readers import table-level modules

    path = data_file_path(data_file.path, table=store.uri)
    size = data_file.file_size_bytes or None
    try:
        if is_legacy_version(data_file.file_major_version, data_file.file_minor_version):
            if not data_file.fields:
                return None
            ids = (data_file.fields[0], max(data_file.fields))
            with LegacyFileReader(store, path, field_ids=ids, size=size) as reader:
                return reader.num_rows
        with LanceFileReader(store, path, size=size) as reader:
            return reader.num_rows
    except LanceError as exc:
        raise exc.with_context(table=store.uri)
    except OSError as exc:
        raise CorruptFileError(f"cannot read the data file to count its rows: {exc}", table=store.uri,
                               path=path) from exc


def fragment_batch_rows(store: ObjectStore, fragment) -> list[int] | None:
    """Batch lengths of a fragment's first data file if it is a legacy file, else None."""

    if not fragment.files:
        return None
    first = fragment.files[0]
    if not is_legacy_version(first.file_major_version, first.file_minor_version) or not first.fields:
        return None
    path = data_file_path(first.path, table=store.uri)
    with LegacyFileReader(store, path, field_ids=(first.fields[0], max(first.fields)),
                          size=first.file_size_bytes or None) as reader:
        return np.diff(reader.batch_offsets).astype(int).tolist()
