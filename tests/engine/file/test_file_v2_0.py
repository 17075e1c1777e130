"""Lance file version 2.0: our writer and reader against pylance's single-file API, both ways."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader
from lance.file import LanceFileWriter as PyWriter

from lance_format.file.container import read_file_metadata, unpack_any
from lance_format.file.plans import plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_0_pb2
from lance_format.schema import LanceSchema
from tests.type_matrix import type_matrix

# -- helpers -----------------------------------------------------------------------------------


def extra_columns(n: int) -> dict[str, pa.Array]:
    """Types and null patterns the shared matrix does not cover."""
    rows = range(n)
    return {
        "null_type": pa.nulls(n),
        "fsl_item_nulls": pa.array(
            [None if i % 7 == 3 else [i, None if i % 2 else -i] for i in rows], pa.list_(pa.int32(), 2)
        ),
        "fsl_bool": pa.array([None if i % 5 == 1 else [i % 2 == 0, None, True] for i in rows], pa.list_(pa.bool_(), 3)),
        "fsl_fsl": pa.array(
            [None if i % 6 == 2 else [[i, i + 1], [None, i]] for i in rows], pa.list_(pa.list_(pa.int16(), 2), 2)
        ),
        "x_list_struct_nulls": pa.array(
            [
                None if i % 5 == 0 else [{"a": None if j % 2 else j, "b": None if j % 3 else f"b{j}"} for j in range(i % 4)]
                for i in rows
            ],
            pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ),
        "x_list_list_nulls": pa.array(
            [None if i % 4 == 1 else [None if j == 1 else [k if k % 2 else None for k in range(j)] for j in range(i % 3)] for i in rows],
            pa.list_(pa.list_(pa.int64())),
        ),
        "struct_of_list_struct": pa.array(
            [{"l": [{"q": i}] * (i % 3) if i % 4 else None, "v": float(i)} for i in rows],
            pa.struct([("l", pa.list_(pa.struct([("q", pa.int32())]))), ("v", pa.float64())]),
        ),
        "low_card": pa.array([f"cat{i % 7}" for i in rows]),
        "low_card_nulls": pa.array([None if i % 3 == 0 else f"c{i % 5}" for i in rows]),
        "all_null_string": pa.nulls(n, pa.string()),
        "all_null_list": pa.nulls(n, pa.list_(pa.int32())),
        "all_null_fsl": pa.nulls(n, pa.list_(pa.float32(), 4)),
        "all_null_bool": pa.nulls(n, pa.bool_()),
        "dict_int_values": pa.DictionaryArray.from_arrays(
            pa.array([None if i % 4 == 0 else i % 3 for i in rows], pa.int8()), pa.array([10, 20, 30], pa.int64())
        ),
    }


def matrix(n: int, *, nulls: bool = True) -> pa.Table:
    table = type_matrix(n, nulls=nulls)
    for name, column in extra_columns(n).items():
        table = table.append_column(name, column)
    return table


def _plain(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Dictionary columns compare by value (pylance keeps null dictionary items, we drop them)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if chunks and pa.types.is_dictionary(chunks[0].type):
        chunks = [c.cast(c.type.value_type) for c in chunks]
    if not chunks:
        data_type = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        return pa.array([], data_type)
    return pa.chunked_array(chunks).combine_chunks()


def assert_same(actual: pa.Table, expected: pa.Table, context: str = "") -> None:
    assert actual.column_names == expected.column_names, context
    assert actual.num_rows == expected.num_rows, context
    for name in expected.column_names:
        a, e = actual.column(name), expected.column(name)
        assert a.type == e.type, f"{context}: {name}: {a.type} != {e.type}"
        pa_, pe = _plain(a), _plain(e)
        assert pa_.equals(pe), f"{context}: column {name} differs\nours={pa_.to_pylist()[:8]}\nwant={pe.to_pylist()[:8]}"


def write_ours(tmp_path, table: pa.Table, *, name: str = "ours.lance", batch_rows: int | None = None, **kwargs) -> str:
    store = ObjectStore(tmp_path)
    writer = LanceFileWriter(store, f"data/{name}", LanceSchema.from_arrow(table.schema), **kwargs)
    batches = table.to_batches(max_chunksize=batch_rows) if batch_rows else table.combine_chunks().to_batches()
    for batch in batches:
        writer.write_batch(batch)
    written = writer.finish()
    assert written.num_rows == table.num_rows
    return f"data/{name}"


def write_pylance(tmp_path, table: pa.Table, *, name: str = "py.lance", **kwargs) -> str:
    (tmp_path / "data").mkdir(exist_ok=True)
    with PyWriter(str(tmp_path / "data" / name), table.schema, version="2.0", **kwargs) as writer:
        if table.num_rows:
            writer.write_batch(table)
    return f"data/{name}"


def open_ours(tmp_path, rel: str) -> tuple[LanceFileReader, list, pa.Schema]:
    reader = LanceFileReader(ObjectStore(tmp_path), rel)
    schema = reader.lance_schema()
    return reader, plans_for_schema(schema), schema.to_arrow()


def read_ours(tmp_path, rel: str) -> pa.Table:
    reader, plans, schema = open_ours(tmp_path, rel)
    with reader:
        return pa.Table.from_arrays(reader.read_range(plans, 0, reader.num_rows), schema=schema)


def read_pylance(tmp_path, rel: str) -> pa.Table:
    return PyReader(str(tmp_path / rel)).read_all().to_table()


def page_kinds(tmp_path, rel: str) -> list[list[str]]:
    path = tmp_path / rel
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, path.stat().st_size, path=rel)
    return [
        [unpack_any(p.encoding.direct.encoding, encodings_v2_0_pb2.ArrayEncoding).WhichOneof("array_encoding") for p in c.pages]
        for c in meta.columns
    ]


# -- our writer -> pylance and our reader ----------------------------------------------------


@pytest.mark.parametrize(
    "n, nulls, batch_rows, max_page_bytes",
    [
        (60, True, None, 8 * 1024 * 1024),
        (60, False, None, 8 * 1024 * 1024),
        (257, True, 50, 512),  # sliced batches, many pages per column
        (0, True, None, 8 * 1024 * 1024),
    ],
)
def test_our_files_read_back_in_pylance_and_ours(tmp_path, n, nulls, batch_rows, max_page_bytes):
    table = matrix(n, nulls=nulls) if n else matrix(10).slice(0, 0)
    rel = write_ours(tmp_path, table, batch_rows=batch_rows, max_page_bytes=max_page_bytes)
    assert_same(read_pylance(tmp_path, rel), table, "pylance reads ours")
    assert_same(read_ours(tmp_path, rel), table, "we read ours")
    if max_page_bytes == 512:
        assert max(len(k) for k in page_kinds(tmp_path, rel)) > 3  # really multi-page


def test_written_file_facts(tmp_path):
    table = matrix(20)
    store = ObjectStore(tmp_path)
    schema = LanceSchema.from_arrow(table.schema)
    writer = LanceFileWriter(store, "data/x.lance", schema)
    writer.write_batch(table.to_batches()[0])
    written = writer.finish()
    assert written.path == "data/x.lance"
    assert written.field_ids == schema.field_ids()
    assert written.column_indices == list(range(len(schema.field_ids())))
    assert written.size_bytes == (tmp_path / "data/x.lance").stat().st_size
    reader = LanceFileReader(store, "data/x.lance")
    assert reader.version == (0, 3)
    assert reader.num_columns == len(written.field_ids)
    assert [f.id for f in reader.schema().fields] == written.field_ids


def test_sliced_arrays_with_offsets(tmp_path):
    table = matrix(120)
    # odd offsets: bitmaps start mid-byte, list offsets do not start at 0
    sliced = table.slice(13, 77)
    store = ObjectStore(tmp_path)
    writer = LanceFileWriter(store, "data/s.lance", LanceSchema.from_arrow(table.schema), max_page_bytes=300)
    for start in (0, 5, 31):
        stop = {0: 5, 5: 31, 31: 77}[start]
        writer.write_batch(pa.RecordBatch.from_arrays([c.combine_chunks().slice(start, stop - start) for c in sliced.columns], schema=table.schema))
    writer.finish()
    assert_same(read_pylance(tmp_path, "data/s.lance"), sliced, "pylance")
    assert_same(read_ours(tmp_path, "data/s.lance"), sliced, "ours")


def test_byte_identical_to_pylance(tmp_path):
    """Same batches, same pages: our bytes equal pylance's (2.0, default page size)."""
    table = matrix(150).drop(["struct", "struct_nulls", "struct_of_list_struct", "null_type"])
    ours = write_ours(tmp_path, table, batch_rows=40)
    (tmp_path / "data").mkdir(exist_ok=True)
    with PyWriter(str(tmp_path / "data/py.lance"), table.schema, version="2.0") as writer:
        for batch in table.to_batches(max_chunksize=40):
            writer.write_batch(batch)
    assert (tmp_path / ours).read_bytes() == (tmp_path / "data/py.lance").read_bytes()


# -- pylance writer -> our reader ------------------------------------------------------------


@pytest.mark.parametrize("layout", ["one page", "small pages", "many batches"])
def test_pylance_files_read_in_ours(tmp_path, layout):
    table = matrix(300)
    if layout == "many batches":
        # fresh (unsliced) batches and a small cache: list offsets get several pages too
        (tmp_path / "data").mkdir()
        rel = "data/py.lance"
        with PyWriter(str(tmp_path / rel), table.schema, version="2.0", max_page_bytes=700, data_cache_bytes=20000) as w:
            for start in range(0, 300, 40):
                w.write_batch(table.take(np.arange(start, min(start + 40, 300))))
        assert min(len(k) for k in page_kinds(tmp_path, rel) if k and k[0] == "list") > 3
    else:
        kwargs = {"max_page_bytes": 700} if layout == "small pages" else {}
        rel = write_pylance(tmp_path, table, **kwargs)
        if kwargs:
            assert max(len(k) for k in page_kinds(tmp_path, rel)) > 3
    assert_same(read_ours(tmp_path, rel), table, "full read")
    reader, plans, schema = open_ours(tmp_path, rel)
    rng = np.random.default_rng(3)
    for start, stop in [(0, 1), (299, 300), (17, 18), (0, 300), (5, 5)] + [tuple(sorted(rng.integers(0, 301, 2))) for _ in range(8)]:
        got = pa.Table.from_arrays(reader.read_range(plans, int(start), int(stop)), schema=schema)
        assert_same(got, table.slice(start, stop - start), f"range {start}:{stop}")
    for indices in (rng.permutation(300)[:40], np.array([299, 0, 5, 5, 150, 0]), np.arange(30, 60), np.array([], np.uint64)):
        got = pa.Table.from_arrays(reader.take(plans, indices.astype(np.uint64)), schema=schema)
        assert_same(got, table.take(pa.array(indices.astype(np.int64))), f"take {indices[:6]}")


def test_empty_pylance_file(tmp_path):
    table = matrix(10).slice(0, 0)
    rel = write_pylance(tmp_path, table)
    got = read_ours(tmp_path, rel)
    assert got.num_rows == 0
    assert_same(got, table)


def test_sequential_batches_decode_each_page_once(tmp_path, monkeypatch):
    table = pa.table({"i": np.arange(5000), "s": [f"v{i}" for i in range(5000)], "l": [[i] * (i % 3) for i in range(5000)]})
    rel = write_ours(tmp_path, table, max_page_bytes=16 * 1024)
    import lance_format.file.reader_v2_0 as reader_module

    calls = []
    original = reader_module.decode_leaf
    monkeypatch.setattr(reader_module, "decode_leaf", lambda *a, **k: calls.append(1) or original(*a, **k))
    reader, plans, schema = open_ours(tmp_path, rel)
    batches = [pa.Table.from_arrays(reader.read_range(plans, s, min(s + 100, 5000)), schema=schema) for s in range(0, 5000, 100)]
    assert_same(pa.concat_tables(batches), table)
    total_leaf_pages = sum(len(k) for k in page_kinds(tmp_path, rel) if k and k[0] != "list")
    assert len(calls) == total_leaf_pages


def test_writer_streams_pages(tmp_path):
    """Buffered data is flushed as pages while writing, not kept until finish()."""
    store = ObjectStore(tmp_path)
    schema = LanceSchema.from_arrow(pa.schema([("x", pa.int64())]))
    writer = LanceFileWriter(store, "data/big.lance", schema, max_page_bytes=64 * 1024)
    for i in range(20):
        writer.write_batch(pa.record_batch([pa.array(np.arange(i * 10000, (i + 1) * 10000))], names=["x"]))
        assert sum(len(c.pages) for c in writer._columns) >= (i * 10000 * 8) // (64 * 1024) - 1
    writer.finish()
    assert read_pylance(tmp_path, "data/big.lance")["x"].to_numpy().tolist() == list(range(200000))
