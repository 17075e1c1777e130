"""An index segment's directory: ``_indices/<uuid>/`` under the table's (or a base path's) root.

Every file in it is an ordinary Lance file (pylance's ``LanceIndexStore``): a pyarrow table with
schema metadata, written by the engine's own file writer at the file version pylance uses for
index files. pylance 14.0.2 writes them at the table's data storage version (a 2.0 table's
index files have footer (0, 3), a 2.2 table's (2, 2)); :func:`index_file_version` says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, InvalidInputError, LanceError
from lance_format.file.api import LanceFileReader, LanceFileWriter
from lance_format.io import ObjectStore

INDICES_DIR = "_indices"


def index_file_version(data_storage_version: str) -> str:
    """The file version of a table's new index files: its data storage version (legacy -> 2.0)."""
    version = (data_storage_version or "2.0").lower().lstrip("v")
    if version in ("0.1", "legacy", "0.3", "2", "2.0"):
        return "2.0"
    if version in ("stable", "next"):
        return "2.2"
    return version


def index_dir(uuid: str) -> str:
    """The directory of segment ``uuid``, relative to its root."""
    return f"{INDICES_DIR}/{uuid}"


class IndexStore:
    """The files of one index segment: write tables as Lance files, read them back, list sizes.

    ``store`` is the root the segment lives under (the table's, or its ``base_id``'s base path);
    names are file names within the segment's directory (``page_data.lance``).
    """

    def __init__(self, store: ObjectStore, uuid: str, file_version: str = "2.2") -> None:
        self.store = store
        self.uuid = uuid
        self.directory = index_dir(uuid)
        self.file_version = file_version
        self._written: dict[str, int] = {}
        self._readers: dict[str, LanceFileReader] = {}

    def path(self, name: str) -> str:
        return f"{self.directory}/{name}"

    # -- writing ---------------------------------------------------------------------------------

    def write_table(self, name: str, data: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
                    schema: pa.Schema | None = None, metadata: Mapping[str, str] | None = None) -> int:
        """Write ``data`` (a table, a batch, or batches of ``schema``) as Lance file ``name`` with
        ``metadata`` as its schema metadata; the file's size in bytes."""
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            schema = schema or data.schema
            batches: Iterable[pa.RecordBatch] = (data.to_batches() if isinstance(data, pa.Table) else [data])
        else:
            batches = data
        if schema is None:
            raise InvalidInputError(f"index file {name} needs a schema", path=self.path(name))
        writer = LanceFileWriter(self.path(name), schema.remove_metadata(), version=self.file_version,
                                 _store=self.store)
        for key, value in (metadata or {}).items():
            writer.add_schema_metadata(key, value)
        for batch in batches:
            if batch.num_rows:
                writer.write_batch(batch)
        writer.close()
        size = int(writer.size_bytes or 0)
        self._written[name] = size
        return size

    def copy_from(self, source: IndexStore, name: str, new_name: str) -> int:
        """Copy file ``name`` of segment ``source`` into this one as ``new_name``; its size."""
        data = source.store.read_bytes(source.path(name))
        self.store.write_bytes(self.path(new_name), data)
        self._written[new_name] = len(data)
        return len(data)

    def written_files(self) -> list[tuple[str, int]]:
        """``(name, size)`` of the files written through this store, sorted by name (the order
        pylance lists them in ``IndexMetadata.files``)."""
        return sorted(self._written.items())

    # -- reading ---------------------------------------------------------------------------------

    def _reader(self, name: str) -> LanceFileReader:
        reader = self._readers.get(name)
        if reader is None:
            if not self.store.exists(self.path(name)):
                raise CorruptFileError(f"index file {name} of index {self.uuid} is missing",
                                       table=self.store.uri, path=self.path(name))
            try:
                reader = LanceFileReader(self.path(name), _store=self.store)
            except LanceError as exc:
                raise exc.with_context(table=self.store.uri, path=self.path(name))
            self._readers[name] = reader
        return reader

    def exists(self, name: str) -> bool:
        return self.store.exists(self.path(name))

    def schema(self, name: str) -> pa.Schema:
        """The file's arrow schema, with its schema metadata."""
        return self._reader(name).metadata().schema

    def schema_metadata(self, name: str) -> dict[str, str]:
        meta = self.schema(name).metadata or {}
        return {k.decode(): v.decode() for k, v in meta.items()}

    def num_rows(self, name: str) -> int:
        return self._reader(name).num_rows()

    def read_table(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        """Every row of file ``name`` (``columns`` of it)."""
        reader = self._reader(name) if columns is None else LanceFileReader(
            self.path(name), columns=list(columns), _store=self.store)
        return reader.read_all(batch_size=1 << 30).to_table()

    def read_range(self, name: str, start: int, stop: int, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``[start, stop)`` of file ``name``."""
        reader = self._reader(name) if columns is None else LanceFileReader(
            self.path(name), columns=list(columns), _store=self.store)
        return reader.read_range(start, stop - start, batch_size=1 << 30).to_table()

    def take(self, name: str, rows: np.ndarray, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows at ascending positions ``rows`` of file ``name``."""
        reader = self._reader(name) if columns is None else LanceFileReader(
            self.path(name), columns=list(columns), _store=self.store)
        return reader.take_rows(np.asarray(rows, dtype=np.int64), batch_size=1 << 30).to_table()

    def file_sizes(self) -> list[tuple[str, int]]:
        """``(name, size)`` of every file in the segment's directory, sorted by name."""
        infos = self.store.list_files(self.directory, recursive=False)
        return sorted((info.base_name, int(info.size or 0)) for info in infos)
