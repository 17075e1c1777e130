"""Structs that official Lance packs row by row in 2.0 files (field metadata ``packed: true``)."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.encodings.array_v2_0.packed_struct import decode_packed_struct
from lance_format.encodings.buffers import DecodeContext
from lance_format.errors import CorruptFileError
from lance_format.proto import encodings_v2_0_pb2 as pb
from tests.compat import assert_same_history, assert_tables_equal

POINT = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.float64()), pa.field("c", pa.int64()),
                   pa.field("v", pa.list_(pa.float32(), 2)), pa.field("u", pa.uint8()),
                   pa.field("t", pa.timestamp("us"))])


def _points(n: int) -> pa.Array:
    return pa.array([{"a": i, "b": i / 2, "c": i * 10, "v": [i, -i], "u": i % 7, "t": i * 1000} for i in range(n)],
                    POINT)


@pytest.mark.parametrize("key", ["packed", "lance-encoding:packed"])
def test_packed_struct_reads_like_pylance(tmp_path, key):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("p", POINT, metadata={key: "true"}), pa.field("x", pa.int64())])
    table = pa.table([_points(1000), pa.array(range(1000))], schema=schema)
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=400)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    # one column for the packed struct: its children are not in DataFile.fields
    assert list(ours.get_fragments()[0].data_files()[0].fields) == [0, 7]
    assert_tables_equal(ours.to_table(), table)
    assert_same_history(uri)
    idx = [999, 3, 401, 3, 0]
    assert_tables_equal(ours.take(idx, columns=["p"]), theirs.take(idx, columns=["p"]))
    assert_tables_equal(ours.to_table(columns=["p"], offset=350, limit=100),
                        theirs.to_table(columns=["p"], offset=350, limit=100))
    assert ours.count_rows("x > 500") == theirs.count_rows("x > 500")


def test_packed_structs_nested_in_lists_and_structs(tmp_path):
    inner = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.float64())])
    outer = pa.struct([pa.field("in", inner), pa.field("z", pa.int64())])
    schema = pa.schema([
        pa.field("l", pa.list_(pa.field("item", inner, metadata={"packed": "true"}))),
        pa.field("s", pa.struct([pa.field("in", inner, metadata={"packed": "true"}), pa.field("z", pa.int64())])),
    ])
    table = pa.table([
        pa.array([[{"a": i, "b": i / 2}] * (i % 3) for i in range(100)], pa.list_(inner)),
        pa.array([{"in": {"a": i, "b": -i / 2}, "z": i} for i in range(100)], outer),
    ], schema=schema)
    uri = str(tmp_path / "t")
    lance.write_dataset(table, uri, data_storage_version="2.0")
    assert_same_history(uri)
    assert lance_format.dataset(uri).to_table().column("l").to_pylist() == table.column("l").to_pylist()


def _page(rows: int) -> tuple[pb.PackedStruct, list[pa.Buffer]]:
    enc = pb.PackedStruct()
    for bits in (32, 64):
        enc.inner.add().flat.bits_per_value = bits
    enc.buffer.buffer_index = 0
    data = np.zeros(rows, dtype=[("a", "<i4"), ("b", "<f8")])
    data["a"] = np.arange(rows)
    data["b"] = np.arange(rows) / 4
    return enc, [pa.py_buffer(data.tobytes())]


def test_packed_struct_page_decoding_and_corruption():
    data_type = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.float64())])
    ctx = DecodeContext("f.lance", "p")
    enc, buffers = _page(5)
    got = decode_packed_struct(enc, buffers, 5, data_type, None, ctx)
    assert got.to_pylist() == [{"a": i, "b": i / 4} for i in range(5)]
    with pytest.raises(CorruptFileError, match="f.lance"):
        decode_packed_struct(enc, [buffers[0].slice(0, 30)], 5, data_type, None, ctx)  # short buffer
    with pytest.raises(CorruptFileError, match="children"):
        del enc.inner[1]
        decode_packed_struct(enc, buffers, 5, data_type, None, ctx)
    enc, buffers = _page(5)
    with pytest.raises(CorruptFileError, match="buffer 3"):
        enc.buffer.buffer_index = 3
        decode_packed_struct(enc, buffers, 5, data_type, None, ctx)
