"""2.0 encodings beyond the basics: dictionary pages, Arrow dictionary columns, compression."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as PyWriter

from lance_format.file.container import ARRAY_ENCODING_URL, pack_any, read_file_metadata, unpack_any
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_0_pb2
from lance_format.schema import LanceSchema
from tests.engine.file.test_file_v2_0 import (
    assert_same,
    open_ours,
    page_kinds,
    read_ours,
    read_pylance,
    write_ours,
    write_pylance,
)


def _encodings(tmp_path, rel: str, column: int = 0) -> list[encodings_v2_0_pb2.ArrayEncoding]:
    path = tmp_path / rel
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, path.stat().st_size, path=rel)
    return [unpack_any(p.encoding.direct.encoding, encodings_v2_0_pb2.ArrayEncoding) for p in meta.columns[column].pages]


DICT_CASES = {
    "100 rows, 99 distinct": pa.array([f"k{i % 99}" for i in range(100)]),
    "100 rows, 100 distinct": pa.array([f"k{i % 100}" for i in range(100)]),
    "99 rows, 1 distinct": pa.array(["a"] * 99),
    "nulls and one value": pa.array(["a", None] * 50),
    "all null": pa.array([None] * 120, pa.string()),
    "large_string never": pa.array([f"k{i % 3}" for i in range(300)], pa.large_string()),
    "binary never": pa.array([f"k{i % 3}".encode() for i in range(300)]),
}


@pytest.mark.parametrize("case", list(DICT_CASES))
def test_dictionary_rule_matches_pylance(tmp_path, case):
    table = pa.table({"s": DICT_CASES[case]})
    py = write_pylance(tmp_path, table)
    ours = write_ours(tmp_path, table)
    assert page_kinds(tmp_path, ours) == page_kinds(tmp_path, py)
    assert (tmp_path / ours).read_bytes() == (tmp_path / py).read_bytes()
    assert_same(read_ours(tmp_path, py), table)
    assert_same(read_pylance(tmp_path, ours), table)


def test_pylance_low_cardinality_pages_are_dictionaries(tmp_path):
    rng = np.random.default_rng(0)
    values = np.array(["alpha", "beta", "gamma", "delta"], dtype=object)[rng.integers(0, 4, 5000)]
    values[rng.random(5000) < 0.1] = None
    table = pa.table({"s": pa.array(values, pa.string())})
    rel = write_pylance(tmp_path, table, max_page_bytes=4096)
    kinds = page_kinds(tmp_path, rel)[0]
    assert len(kinds) > 1 and set(kinds) == {"dictionary"}
    first = _encodings(tmp_path, rel)[0].dictionary
    assert first.num_dictionary_items == 4
    assert first.indices.nullable.no_nulls.values.flat.bits_per_value == 8
    assert_same(read_ours(tmp_path, rel), table)


def test_arrow_dictionary_columns_both_ways(tmp_path):
    """pylance concatenates the batch dictionaries per page and maps null keys to an extra null item."""
    schema = pa.schema([("d", pa.dictionary(pa.int16(), pa.string())), ("n", pa.dictionary(pa.int32(), pa.float64()))])
    batches = [
        pa.record_batch(
            [
                pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, None], pa.int16()), pa.array(["p", "q"])),
                pa.DictionaryArray.from_arrays(pa.array([1, None, 0, 0], pa.int32()), pa.array([1.5, 2.5])),
            ],
            schema=schema,
        ),
        pa.record_batch(
            [
                pa.DictionaryArray.from_arrays(pa.array([2, None, 0, 1], pa.int16()), pa.array(["r", "s", "p"])),
                pa.DictionaryArray.from_arrays(pa.array([0, 0, 0, 0], pa.int32()), pa.array([9.0])),
            ],
            schema=schema,
        ),
    ]
    table = pa.Table.from_batches(batches)
    (tmp_path / "data").mkdir()
    with PyWriter(str(tmp_path / "data/py.lance"), schema, version="2.0") as writer:
        for b in batches:
            writer.write_batch(b)
    store = ObjectStore(tmp_path)
    writer = LanceFileWriter(store, "data/ours.lance", LanceSchema.from_arrow(schema))
    for b in batches:
        writer.write_batch(b)
    writer.finish()
    assert (tmp_path / "data/ours.lance").read_bytes() == (tmp_path / "data/py.lance").read_bytes()
    enc = _encodings(tmp_path, "data/py.lance")[0].dictionary
    assert enc.num_dictionary_items == 6  # p q | r s p | null
    for rel in ("data/py.lance", "data/ours.lance"):
        assert_same(read_ours(tmp_path, rel), table, rel)
        assert_same(read_pylance(tmp_path, rel), table, rel)


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
def test_compressed_binary_pages(tmp_path, scheme):
    meta = {"lance-encoding:compression": scheme}
    if scheme == "zstd":
        meta["lance-encoding:compression-level"] = "3"
    schema = pa.schema(
        [
            pa.field("s", pa.string(), metadata=meta),
            pa.field("b", pa.large_binary(), metadata=meta),
            pa.field("i", pa.int64(), metadata=meta),
        ]
    )
    n = 3000
    table = pa.table(
        {
            "s": [None if i % 11 == 0 else f"value-{i}" for i in range(n)],
            "b": [b"x" * (i % 50) for i in range(n)],
            "i": np.arange(n),
        },
        schema=schema,
    )
    py = write_pylance(tmp_path, table, max_page_bytes=8192)
    ours = write_ours(tmp_path, table, batch_rows=700, max_page_bytes=8192)
    for rel in (py, ours):
        enc = _encodings(tmp_path, rel)[0]
        assert enc.binary.bytes.flat.compression.scheme == scheme
        assert_same(read_ours(tmp_path, rel), table, rel)
        assert_same(read_pylance(tmp_path, rel), table, rel)
        for rows in ([0], [11], [5, 6], [2999]):  # point lookups: the windowed binary path
            reader, plans, arrow_schema = open_ours(tmp_path, rel)
            with reader:
                got = pa.Table.from_arrays(reader.take(plans, np.array(rows)), schema=arrow_schema)
            assert_same(got, table.take(rows), f"{rel} take {rows}")


def test_any_type_url_has_leading_slash():
    enc = encodings_v2_0_pb2.ArrayEncoding()
    enc.struct.SetInParent()
    from google.protobuf import any_pb2

    wrapped = any_pb2.Any.FromString(pack_any(enc))
    assert wrapped.type_url == ARRAY_ENCODING_URL == "/lance.encodings.ArrayEncoding"
    assert unpack_any(pack_any(enc), encodings_v2_0_pb2.ArrayEncoding) == enc
