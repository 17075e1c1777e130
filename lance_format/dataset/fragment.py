"""Fragments: the horizontal pieces of a table version (pylance's ``LanceFragment``).

A fragment has one or more data files (each holding some of the schema's fields for the same
rows), an optional deletion file, and, with stable row ids, row-id and row-version sequences.
This module is the fragment's public face (identity, pylance's methods, edits); how its rows are
read, in physical row ranges so memory stays bounded by the batch size, is
:mod:`lance_format.dataset.fragment_reading`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset.arguments import row_positions
from lance_format.dataset.fragment_metadata import DataFile, FragmentMetadata, data_file_from_proto, fragment_from_proto
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.proto import table_pb2
from lance_format.schema import LanceSchema
from lance_format.schema.blob import (
    is_blob_field,
    read_arrow_schema,
)
from lance_format.table.deletion import deleted_row_count, deletion_file_path, live_row_count

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset
    from lance_format.dataset.fragment_session import FragmentSession
    from lance_format.dataset.scanner import LanceScanner

from lance_format.dataset.fragment_reading import (  # the system columns' names are imported from here too
    ROW_ADDRESS as ROW_ADDRESS,
)
from lance_format.dataset.fragment_reading import (
    ROW_CREATED_AT as ROW_CREATED_AT,
)
from lance_format.dataset.fragment_reading import (
    ROW_ID as ROW_ID,
)
from lance_format.dataset.fragment_reading import (
    ROW_LAST_UPDATED_AT as ROW_LAST_UPDATED_AT,
)
from lance_format.dataset.fragment_reading import (
    SYSTEM_COLUMNS as SYSTEM_COLUMNS,
)
from lance_format.dataset.fragment_reading import (
    FragmentReading,
)


class LanceFragment(FragmentReading):
    """One fragment of a table version (mirrors pylance's ``LanceFragment``)."""

    def __init__(self, dataset: LanceDataset, fragment_id: int | table_pb2.DataFragment | None = None, *,
                 fragment: table_pb2.DataFragment | None = None) -> None:
        if isinstance(fragment_id, table_pb2.DataFragment):
            fragment = fragment_id
        elif fragment is None:
            if fragment_id is None:
                raise InvalidInputError("Either fragment or fragment_id must be specified")
            found = dataset.get_fragment(int(fragment_id))
            if found is None:
                raise InvalidInputError(f"Fragment id does not exist: {fragment_id}")
            fragment = found.proto
        self._dataset = dataset
        self.proto: table_pb2.DataFragment = fragment  # the manifest's entry, what the engine reads

    # -- identity ----------------------------------------------------------------------------
    @property
    def _ds(self) -> LanceDataset:
        """pylance's attribute: the dataset this fragment belongs to."""
        return self._dataset

    @property
    def fragment_id(self) -> int:
        """The fragment's id within the table."""
        return self.proto.id

    @property
    def physical_rows(self) -> int:
        """The rows its data files hold, deleted rows included."""
        return self.proto.physical_rows

    @property
    def num_deletions(self) -> int:
        """How many of its rows are deleted (from the fragment's deletion file)."""
        return deleted_row_count(self.proto)

    def data_files(self) -> list[DataFile]:
        """The fragment's data files (pylance's ``DataFile`` values)."""
        return [data_file_from_proto(f) for f in self.proto.files]

    @property
    def metadata(self) -> FragmentMetadata:
        """A description of this fragment (a copy: changing it changes nothing)."""
        return fragment_from_proto(self.proto)

    @property
    def partition_expression(self) -> Any:
        """Not implemented, as in pylance (pyarrow's fragment API; Lance tables are not partitioned)."""
        raise UnsupportedFeatureError("Not implemented yet for LanceFragment", table=self._dataset.uri)

    # -- uncommitted changes and new fragments (pylance's distributed-write API) ---------------
    @staticmethod
    def create(
        dataset_uri: str | os.PathLike[str] | LanceDataset,
        data: Any,
        fragment_id: int | None = None,
        schema: pa.Schema | None = None,
        max_rows_per_group: int | None = 1024,
        progress: Any = None,
        mode: str = "append",
        *,
        data_storage_version: str | None = None,
        use_legacy_format: bool | None = None,
        storage_options: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> FragmentMetadata:
        """Write ``data`` as one new uncommitted fragment (see :func:`fragment_writes.create_fragment`)."""
        from lance_format.dataset.fragment_writes import create_fragment

        return create_fragment(dataset_uri, data, fragment_id, schema, max_rows_per_group, progress, mode,
                               data_storage_version=data_storage_version, use_legacy_format=use_legacy_format,
                               storage_options=storage_options, **kwargs)

    @staticmethod
    def create_from_file(filename: str, dataset: LanceDataset, fragment_id: int) -> FragmentMetadata:
        """A fragment of one Lance file already under the table's ``data/`` (written elsewhere)."""
        from lance_format.dataset.fragment_writes import fragment_from_file

        return fragment_from_file(filename, dataset, fragment_id)

    def delete(self, predicate: str) -> FragmentMetadata | None:
        """This fragment with the rows matching ``predicate`` deleted (a new deletion file), or None
        when no row is left; commit with ``LanceOperation.Delete``."""
        from lance_format.dataset.fragment_writes import delete_from_fragment

        return delete_from_fragment(self, predicate)

    def merge(
        self,
        data_obj: Any,
        left_on: str,
        right_on: str | None = None,
        schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """New columns joined on ``left_on`` = ``right_on`` (unmatched rows get nulls) and the
        widened schema; commit with ``LanceOperation.Merge``."""
        from lance_format.dataset.fragment_writes import merge_fragment

        return merge_fragment(self, data_obj, left_on, right_on, schema)

    def delete_rows(self, offsets: Any) -> FragmentMetadata | None:
        """This fragment with the physical row ``offsets`` deleted, or None when no row is left."""
        from lance_format.dataset.fragment_writes import delete_fragment_rows

        return delete_fragment_rows(self, offsets)

    def update_columns(
        self,
        data_obj: Any,
        left_on: str = "_rowid",
        right_on: str | None = None,
        schema: pa.Schema | None = None,
        *,
        with_offsets: bool = False,
    ) -> tuple[FragmentMetadata, list[int]] | tuple[FragmentMetadata, list[int], bytes]:
        """New values for existing columns joined on ``left_on`` = ``right_on``; commit with
        ``LanceOperation.Update`` (see :func:`fragment_writes.update_fragment_columns`)."""
        from lance_format.dataset.fragment_writes import update_fragment_columns

        return update_fragment_columns(self, data_obj, left_on, right_on, schema, with_offsets=with_offsets)

    def merge_columns(
        self,
        value_func: Any,
        columns: list[str] | None = None,
        batch_size: int | None = None,
        reader_schema: pa.Schema | None = None,
    ) -> tuple[FragmentMetadata, LanceSchema]:
        """New columns for this fragment (SQL dict, batch UDF or aligned data) and the new schema;
        commit with ``LanceOperation.Merge``."""
        from lance_format.dataset.fragment_writes import merge_fragment_columns

        return merge_fragment_columns(self, value_func, columns, batch_size, reader_schema)

    def validate(self) -> None:
        """Check this fragment's files against its metadata; raises :class:`CorruptFileError`."""
        from lance_format.dataset.fragment_writes import validate_fragment

        validate_fragment(self)

    def deletion_file(self) -> str | None:
        """Table-relative path of the fragment's deletion file, None without deletions."""
        if not self.proto.HasField("deletion_file"):
            return None
        return deletion_file_path(self.fragment_id, self.proto.deletion_file)

    @property
    def schema(self) -> pa.Schema:
        """The table schema this fragment is read with."""
        return self._dataset.schema

    # -- reading (pylance's LanceFragment API: a scan of the dataset limited to this fragment) --
    def scanner(
        self,
        *,
        columns: list[str] | Mapping[str, str] | None = None,
        batch_size: int | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_readahead: int = 16,
        **scan_options: Any,
    ) -> LanceScanner:
        """A scan of this fragment's live rows; takes ``LanceDataset.scanner``'s options
        (``order_by``, ``include_deleted_rows``, ``strict_batch_size``, ...)."""
        return self._dataset.scanner(columns, filter, limit, offset, batch_size=batch_size, fragments=[self],
                                     with_row_id=with_row_id, with_row_address=with_row_address,
                                     batch_readahead=batch_readahead, **scan_options)

    def to_table(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        **scan_options: Any,
    ) -> pa.Table:
        """This fragment's live rows (those matching ``filter``) as one table."""
        return self.scanner(columns=columns, filter=filter, limit=limit, offset=offset, with_row_id=with_row_id,
                            with_row_address=with_row_address, **scan_options).to_table()

    def to_batches(
        self,
        *,
        columns: list[str] | Mapping[str, str] | None = None,
        batch_size: int | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        batch_readahead: int = 16,
        **scan_options: Any,
    ) -> Iterator[pa.RecordBatch]:
        """This fragment's live rows, batch by batch."""
        return self.scanner(columns=columns, batch_size=batch_size, filter=filter, limit=limit, offset=offset,
                            with_row_id=with_row_id, with_row_address=with_row_address,
                            batch_readahead=batch_readahead, **scan_options).to_batches()

    def to_pandas(
        self,
        columns: list[str] | Mapping[str, str] | None = None,
        filter: str | pc.Expression | None = None,
        limit: int | None = None,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        blob_mode: str = "lazy",
        **scan_options: Any,
    ) -> Any:
        """This fragment's live rows as a pandas DataFrame (``blob_mode`` as in ``LanceDataset.to_pandas``)."""
        from lance_format.dataset.blob_reads import blob_frame

        blobs = blob_mode != "descriptions" and any(is_blob_field(f) for f in self._dataset.lance_schema.fields)
        scanner = self.scanner(columns=columns, filter=filter, limit=limit, offset=offset, batch_size=batch_size,
                               with_row_id=with_row_id, with_row_address=with_row_address or blobs, **scan_options)
        return blob_frame(self._dataset, scanner, blob_mode, with_row_address)

    @property
    def physical_schema(self) -> pa.Schema:
        """The fields this fragment's data files hold (columns added without data excluded)."""
        stored = {fid for data_file in self.proto.files for fid in data_file.fields if fid >= 0}
        schema = self._dataset.lance_schema
        names = [f.name for f in schema.fields if any(leaf.id in stored for leaf in f.walk())]
        return read_arrow_schema(schema.project(names))

    def head(self, num_rows: int) -> pa.Table:
        """The fragment's first ``num_rows`` live rows."""
        return self.to_table(limit=num_rows)

    def take(self, indices: Any, columns: list[str] | None = None) -> pa.Table:
        """Rows at positions among this fragment's live rows, in the order given.

        Raises
        ------
        InvalidInputError
            An index is not an integer or is out of range.
        """
        positions = row_positions(indices, table=self.object_store.uri)
        live = self.live_offsets()
        if len(positions) and (positions.min() < 0 or positions.max() >= len(live)):
            bad = int(positions[(positions < 0) | (positions >= len(live))][0])
            raise InvalidInputError(f"take index {bad} is out of range for fragment {self.fragment_id} with "
                                    f"{len(live)} rows", **self.error_context())
        scanner = self._dataset.scanner(columns=columns)
        return pa.Table.from_batches([scanner.take_physical(self, live[positions])], schema=scanner.projected_schema)

    def open_session(self, columns: list[str] | Mapping[str, str] | None = None,
                     with_row_address: bool | None = None) -> FragmentSession:
        """A session for many takes of ``columns`` from this fragment (pylance's ``open_session``)."""
        from lance_format.dataset.fragment_session import FragmentSession, OpenFragment

        return FragmentSession(OpenFragment(self, columns, bool(with_row_address)))

    def __repr__(self) -> str:
        return f"LanceFragment(id={self.fragment_id}, physical_rows={self.physical_rows})"

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:
        """The fragment's live rows, or those matching ``filter`` (a SQL predicate or pyarrow expression)."""
        if filter is not None:
            return self._dataset.count_rows(filter, fragments=[self])
        if self.proto.HasField("deletion_file") and not self.num_deletions:
            return self.physical_rows - len(self.deleted_offsets)  # count not recorded: read the file
        return live_row_count(self.proto)

    @property
    def object_store(self) -> ObjectStore:
        """The store of the fragment's table."""
        return self._dataset.object_store

    def error_context(self) -> dict[str, Any]:
        """``table`` and ``version`` keywords for the errors raised about this fragment."""
        return {"table": self.object_store.uri, "version": self._dataset.version}

