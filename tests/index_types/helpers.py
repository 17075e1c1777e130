"""Helpers for the ZONEMAP / BLOOMFILTER / LABEL_LIST / NGRAM tests: compare an index file of ours
with pylance's, and open pylance's own segments with the engine's index types."""

from __future__ import annotations

import lance
import pyarrow as pa
from lance.file import LanceFileReader

from lance_format.index.scalar.base import by_name
from lance_format.index.store import IndexStore
from lance_format.io import object_store_for


def store_for(uri: str, uuid: str, file_version: str = "2.2") -> IndexStore:
    return IndexStore(object_store_for(uri), uuid, file_version)


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
