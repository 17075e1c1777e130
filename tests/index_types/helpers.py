"""Helpers for the ZONEMAP / BLOOMFILTER / LABEL_LIST / NGRAM tests: train a segment with the
engine's own reader and index types, commit it with pylance's ``LanceOperation.CreateIndex`` (so
pylance's answers can be checked on it), and open pylance's own segments here."""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime, timezone

import lance
from lance.dataset import Index, IndexFile
from lance.file import LanceFileReader
import numpy as np
import pyarrow as pa

import lance_format
from lance_format.index.scalar.base import by_name
from lance_format.index.store import IndexStore
from lance_format.io import object_store_for


def training_batches(uri: str, column: str, row_key: str, batch_size: int = 5000):
    """``(value, row_key)`` batches of the column, in row-address order, deleted rows left out."""
    table = lance_format.dataset(uri).to_table(columns=[column], with_row_id=row_key == "_rowid",
                                               with_row_address=row_key == "_rowaddr")
    table = pa.table({"value": table.column(column), row_key: table.column(row_key)})
    return table.to_batches(max_chunksize=batch_size)


def store_for(uri: str, uuid: str, file_version: str = "2.2") -> IndexStore:
    return IndexStore(object_store_for(uri), uuid, file_version)


def build_ours(uri: str, column: str, index_type: str, name: str | None = None, commit: bool = True,
               **params):
    """Train our segment for ``column``; commit it with pylance unless ``commit=False``.
    Returns ``(uuid, store, details)``."""
    kind = by_name(index_type)
    ds = lance.dataset(uri)
    field = ds.schema.field(column)
    uuid = str(uuidlib.uuid4())
    store = store_for(uri, uuid, ds.data_storage_version)
    kind.train(store, training_batches(uri, column, kind.row_key), field.type, params)
    details = kind.details(params)
    if commit:
        field_id = ds.lance_schema.field(column).id() if hasattr(ds, "lance_schema") else None
        if field_id is None:
            field_id = [f.name for f in ds.schema].index(column)
        files = [IndexFile(path=n, size_bytes=s) for n, s in store.written_files()]
        index = Index(
            uuid=uuid, name=name or f"{column}_idx", fields=[field_id], dataset_version=ds.version,
            fragment_ids={f.fragment_id for f in ds.get_fragments()}, index_version=kind.index_version,
            created_at=datetime.now(timezone.utc), files=files, index_details=(kind.type_url, details))
        lance.LanceDataset.commit(uri, lance.LanceOperation.CreateIndex(new_indices=[index], removed_indices=[]),
                                  read_version=ds.version)
    return uuid, store, details


def index_file(uri: str, name: str, file: str) -> str:
    ds = lance.dataset(uri)
    info = next(i for i in ds.list_indices() if i["name"] == name)
    return f"{uri}/_indices/{info['uuid']}/{file}"


def _values(table: pa.Table) -> dict[str, list[str]]:
    """The table's values, NaNs comparable (``repr``)."""
    return {name: [repr(v) for v in table.column(name).to_pylist()] for name in table.column_names}


def assert_same_index_file(uri: str, ours: str, theirs: str, file: str) -> None:
    """Our index file equals pylance's: the same schema (and schema metadata), file version, rows
    (NaNs included) and global buffers (the null bitmaps). Whole-file bytes are not compared:
    pylance's own differ between builds (its schema metadata map has no fixed order), and the two
    file writers may page or compress a column differently."""
    a_path, b_path = index_file(uri, ours, file), index_file(uri, theirs, file)
    a, b = LanceFileReader(a_path), LanceFileReader(b_path)
    meta_a, meta_b = a.metadata(), b.metadata()
    assert meta_a.schema.equals(meta_b.schema, check_metadata=True)
    assert (meta_a.major_version, meta_a.minor_version) == (meta_b.major_version, meta_b.minor_version)
    assert _values(a.read_all().to_table()) == _values(b.read_all().to_table())
    assert len(meta_a.global_buffers) == len(meta_b.global_buffers)
    for i in range(1, len(meta_a.global_buffers)):
        assert a.read_global_buffer(i) == b.read_global_buffer(i)


def pylance_segment(uri: str, name: str):
    """Our loaded view of pylance's segment ``name``."""
    ds = lance.dataset(uri)
    info = next(i for i in ds.list_indices() if i["name"] == name)
    kind = by_name({"ZoneMap": "ZONEMAP", "BloomFilter": "BLOOMFILTER", "LabelList": "LABEL_LIST",
                    "NGram": "NGRAM"}[info["type"]])
    return kind.load(store_for(uri, info["uuid"], ds.data_storage_version), b"")


def matching_ids(uri: str, filter: str, key: str = "_rowaddr", use_index: bool = True) -> np.ndarray:
    """The row addresses (or ids) pylance returns for ``filter``."""
    ds = lance.dataset(uri)
    table = ds.to_table(columns=[], filter=filter, with_row_address=key == "_rowaddr", with_row_id=key == "_rowid",
                        use_scalar_index=use_index)
    return np.sort(table.column(key).to_numpy())
