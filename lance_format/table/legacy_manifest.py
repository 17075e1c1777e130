"""Row counts of fragments in manifests written by early Lance releases.

Manifests written before ``writer_version`` existed (Lance < 0.8.x) may lack
``DataFragment.physical_rows`` or carry a wrong value (a Lance 0.8.0 migration stored the live
row count there). Official Lance trusts ``physical_rows`` only when the manifest has a writer
version and the value is non-zero; otherwise it asks the fragment's first data file. Doing the
same when a manifest is read makes every later count, read and commit see the true value (a
commit then persists it, as official Lance's manifest migration does).
"""

from __future__ import annotations

from lance_format.errors import LanceError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2


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
    # imported here: the file readers import table-level modules
    from lance_format.dataset.fragment import data_file_path
    from lance_format.file.legacy_v0_1 import LegacyFileReader, is_legacy_version
    from lance_format.file.reader import LanceFileReader

    try:
        path = data_file_path(data_file.path, table=store.uri)
        size = data_file.file_size_bytes or None
        if is_legacy_version(data_file.file_major_version, data_file.file_minor_version):
            if not data_file.fields:
                return None
            ids = (data_file.fields[0], max(data_file.fields))
            with LegacyFileReader(store, path, field_ids=ids, size=size) as reader:
                return reader.num_rows
        with LanceFileReader(store, path, size=size) as reader:
            return reader.num_rows
    except (LanceError, OSError):
        return None  # an unreadable file is reported when its rows are read
