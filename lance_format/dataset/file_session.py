"""pylance's ``lance.file`` API of a file session (``LanceDataset.new_file_session()``): Lance
files and other objects under one base path, read and written through the table's object store.

:class:`LanceFileSession` opens readers and writers with pylance's methods (``read_all``,
``read_range``, ``take_rows``, ``num_rows``; ``write_batch``, ``add_schema_metadata``,
``close``) and handles plain objects (``contains``, ``list``, ``list_with_delimiter``,
``read_range``, ``delete_file``, ``upload_file``, ``download_file``). Paths are relative to the
base path. New files are file version 2.2 (pylance's "stable") unless ``version`` says otherwise.
The engine's own low-level file classes stay in :mod:`lance_format.file`.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

import numpy as np
import pyarrow as pa

from lance_format.dataset.writing.fragment_sink import DEFAULT_STORAGE_VERSION
from lance_format.errors import InvalidInputError
from lance_format.file.plans import plans_for_schema, structural_plans_for_schema
from lance_format.file.reader import LanceFileReader as _FileReader
from lance_format.file.writer import LanceFileWriter as _FileWriter
from lance_format.io import ObjectStore, object_store_for
from lance_format.schema import LanceSchema

_VERSION_ALIASES = {"stable": "2.2", "legacy": "0.1", "2": "2.0"}


class ReaderResults:
    """What a read returned (pylance's ``ReaderResults``)."""

    def __init__(self, table: pa.Table, batch_size: int) -> None:
        self._table = table
        self._batch_size = batch_size

    def to_table(self) -> pa.Table:
        return self._table

    def to_batches(self) -> pa.RecordBatchReader:
        batches = self._table.to_batches(max_chunksize=self._batch_size)
        return pa.RecordBatchReader.from_batches(self._table.schema, batches)


class SessionFileReader:
    """One Lance file opened by a session, with pylance's ``LanceFileReader`` methods."""

    def __init__(self, store: ObjectStore, path: str, columns: Optional[list[str]] = None) -> None:
        self._reader = _FileReader(store, path)
        schema = self._reader.lance_schema()
        plans = structural_plans_for_schema(schema) if self._reader.structural else plans_for_schema(schema)
        if columns is not None:
            by_name = {p.field.name: p for p in plans}
            missing = [c for c in columns if c not in by_name]
            if missing:
                raise InvalidInputError(f"columns {missing} are not in the file (it has {list(by_name)})", path=path)
            plans = [by_name[c] for c in columns]
        self._plans = plans
        self._schema = pa.schema([p.field for p in plans], metadata=schema.to_arrow().metadata)

    def _results(self, arrays: list[pa.Array], batch_size: int) -> ReaderResults:
        return ReaderResults(pa.Table.from_arrays(arrays, schema=self._schema), batch_size)

    def read_all(self, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """Every row of the file."""
        return self._results(self._reader.read_range(self._plans, 0, self._reader.num_rows), batch_size)

    def read_range(self, start: int, num_rows: int, *, batch_size: int = 1024, batch_readahead: int = 16
                   ) -> ReaderResults:
        """Rows ``[start, start + num_rows)``."""
        return self._results(self._reader.read_range(self._plans, int(start), int(start) + int(num_rows)), batch_size)

    def take_rows(self, indices: Any, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """The rows at ``indices``, which must be in ascending order (as in pylance)."""
        positions = np.asarray(indices, dtype=np.int64)
        if positions.size > 1 and bool(np.any(positions[1:] < positions[:-1])):
            at = int(np.argmax(positions[1:] < positions[:-1]))
            raise InvalidInputError(f"Indices must be sorted in ascending order for file API, got "
                                    f"{int(positions[at])} > {int(positions[at + 1])}")
        return self._results(self._reader.take(self._plans, positions), batch_size)

    def num_rows(self) -> int:
        return self._reader.num_rows

    def close(self) -> None:
        self._reader.close()


class SessionFileWriter:
    """A Lance file written through a session, with pylance's ``LanceFileWriter`` methods; the
    schema comes from the first batch when none is given."""

    def __init__(self, store: ObjectStore, path: str, schema: Optional[pa.Schema] = None,
                 version: Optional[str] = None, max_page_bytes: Optional[int] = None) -> None:
        self._store, self._path = store, path
        self._version = _VERSION_ALIASES.get(version or "", version) or DEFAULT_STORAGE_VERSION
        self._max_page_bytes = max_page_bytes
        self._metadata: dict[str, str] = {}
        self._writer: Optional[_FileWriter] = None
        self._rows = 0
        if schema is not None:
            self._open(schema)

    def _open(self, schema: pa.Schema) -> _FileWriter:
        lance_schema = LanceSchema.from_arrow(schema)
        options: dict[str, Any] = {"version": self._version}
        if self._max_page_bytes:
            options["max_page_bytes"] = int(self._max_page_bytes)
        self._writer = _FileWriter(self._store, self._path, lance_schema, **options)
        return self._writer

    def write_batch(self, batch: Union[pa.RecordBatch, pa.Table]) -> None:
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        writer = self._writer or self._open(batch.schema)
        for piece in batches:
            writer.write_batch(piece)
            self._rows += piece.num_rows

    def add_schema_metadata(self, key: str, value: str) -> None:
        """A key/value pair for the file's schema metadata (written on close)."""
        self._metadata[str(key)] = str(value)

    def close(self) -> Optional[int]:
        """Finish the file; the number of rows written (None if nothing was ever written)."""
        if self._writer is None:
            return None
        self._writer.schema.metadata.update({k: v.encode() for k, v in self._metadata.items()})
        self._writer.finish()
        return self._rows

    def __enter__(self) -> "SessionFileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        elif self._writer is not None:
            self._writer.abort()


@dataclass
class ListResult:
    """One directory level: child "directories" and files (pylance's ``ListResult``)."""

    common_prefixes: list[str]
    objects: list[str]


class LanceFileSession:
    """Readers, writers and objects under ``base_path`` (pylance's ``lance.file.LanceFileSession``)."""

    def __init__(self, base_path: Union[str, os.PathLike[str]], storage_options: Optional[Mapping[str, str]] = None,
                 namespace_client: Any = None, table_id: Any = None) -> None:
        if namespace_client is not None or table_id is not None:
            raise InvalidInputError("LanceFileSession(namespace_client=..., table_id=...) is not supported here")
        self._store = object_store_for(os.fspath(base_path), storage_options)

    def open_reader(self, path: str, columns: Optional[list[str]] = None) -> SessionFileReader:
        return SessionFileReader(self._store, path, columns)

    def open_writer(self, path: str, *, schema: Optional[pa.Schema] = None, data_cache_bytes: Optional[int] = None,
                    version: Optional[str] = None, keep_original_array: Optional[bool] = None,
                    max_page_bytes: Optional[int] = None) -> SessionFileWriter:
        return SessionFileWriter(self._store, path, schema, version, max_page_bytes)

    def contains(self, path: str) -> bool:
        return self._store.exists(path)

    def list(self, path: Optional[str] = None) -> list[str]:
        """Every file under ``path`` (recursively), as paths relative to the base path."""
        infos = self._store.list_files(path or "", recursive=True)
        return [self._store.relative_path(i) for i in infos]

    def list_with_delimiter(self, path: Optional[str] = None) -> ListResult:
        """The direct children of ``path``: "directories" (prefixes of deeper files) and files."""
        base = (path or "").strip("/")
        prefixes, objects = set(), []
        for relative in self.list(base or None):
            rest = relative[len(base) + 1:] if base else relative
            head, _, tail = rest.partition("/")
            child = posixpath.join(base, head) if base else head
            if tail:
                prefixes.add(child)
            else:
                objects.append(child)
        return ListResult(sorted(prefixes), sorted(objects))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of an object, from ``offset``."""
        if length <= 0:
            return b""
        return bytes(self._store.read_ranges(path, [(int(offset), int(length))])[0])

    def delete_file(self, path: str) -> None:
        self._store.delete(path)

    def upload_file(self, local_path: Union[str, os.PathLike[str]], remote_path: str) -> None:
        with open(local_path, "rb") as source:
            self._store.write_bytes(remote_path, source.read())

    def download_file(self, remote_path: str, local_path: Union[str, os.PathLike[str]]) -> None:
        data = self._store.read_bytes(remote_path)
        with open(local_path, "wb") as target:
            target.write(data)


__all__ = ["LanceFileSession", "SessionFileReader", "SessionFileWriter", "ReaderResults", "ListResult"]
