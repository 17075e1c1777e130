"""ZONEMAP and BLOOMFILTER against pylance 14.0.2, both directions.

Our files equal pylance's byte for byte on the same table; pylance answers filters from our
indices exactly as its own full scan; pylance's indices loaded here answer supersets that hold
every matching row (and IS NULL exactly), and our filtered scans equal full scans.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices import IndexConfig

import lance_format
import lance_format.index.scalar.queries as q
from lance_format.errors import InvalidInputError
from lance_format.index.scalar import sbbf
from lance_format.index.scalar.xxhash64 import hash_binary, hash_fixed
from tests.index_types.helpers import assert_same_index_file, pylance_segment, store_for

ZONE_FILTERS = [
    "id = 5", "id = 7000", "id IN (5, 9001, 23999, 99999)", "id > 6990 AND id < 7020", "id BETWEEN 13990 AND 14010",
    "x IS NULL", "x > 2.5", "x < -2.9 OR x IS NULL", "x = 0.0", "x = -0.0", "ts > TIMESTAMP '2024-07-01 00:00:00'",
    "score = 17", "cat = 'delta'", "cat IS NULL", "NOT (id < 23000)",
]
BLOOM_FILTERS = ["cat = 'delta'", "cat IN ('epsilon', 'nope')", "cat = 'nope'", "cat IS NULL", "score = 17",
                 "score IN (1, 2, 999)", "id = 12345", "ts = TIMESTAMP '2024-01-01 01:42:51.428571'",
                 "x = 0.0", "email = 'user7.o_brien@café-münster.de'"]


def _ids(ds, flt: str, **kwargs) -> np.ndarray:
    return np.sort(ds.to_table(columns=["id"], filter=flt, **kwargs).column("id").to_numpy())


@pytest.mark.parametrize("column,kind,file", [
    ("id", "ZONEMAP", "zonemap.lance"), ("x", "ZONEMAP", "zonemap.lance"), ("cat", "ZONEMAP", "zonemap.lance"),
    ("ts", "ZONEMAP", "zonemap.lance"), ("tags", "ZONEMAP", "zonemap.lance"),
    ("cat", "BLOOMFILTER", "bloomfilter.lance"), ("x", "BLOOMFILTER", "bloomfilter.lance"),
    ("email", "BLOOMFILTER", "bloomfilter.lance"), ("ts", "BLOOMFILTER", "bloomfilter.lance"),
    ("score", "BLOOMFILTER", "bloomfilter.lance"),
])
def test_files_equal_pylance(dataset_uri, column, kind, file):
    lance.dataset(dataset_uri).create_scalar_index(column, kind, name="theirs")
    lance_format.dataset(dataset_uri).create_scalar_index(column, kind, name="ours")
    assert_same_index_file(dataset_uri, "ours", "theirs", file)
    ds = lance.dataset(dataset_uri)
    stats = {n: ds.stats.index_stats(n) for n in ("ours", "theirs")}
    assert stats["ours"]["indices"] == stats["theirs"]["indices"]
    assert stats["ours"]["num_indexed_rows"] == stats["theirs"]["num_indexed_rows"]
    described = {d.name: d for d in ds.describe_indices()}
    assert described["ours"].type_url == described["theirs"].type_url


def test_zone_parameters_match_pylance(dataset_uri):
    lance.dataset(dataset_uri).create_scalar_index(
        "x", IndexConfig(index_type="zonemap", parameters={"rows_per_zone": 1000}), name="zm_theirs")
    lance.dataset(dataset_uri).create_scalar_index(
        "cat", IndexConfig(index_type="bloomfilter", parameters={"number_of_items": 2000, "probability": 0.01}),
        name="bf_theirs")
    ours = lance_format.dataset(dataset_uri)
    ours.create_scalar_index("x", "ZONEMAP", name="zm_ours", rows_per_zone=1000)
    ours.create_scalar_index("cat", "BLOOMFILTER", name="bf_ours", number_of_items=2000, probability=0.01)
    assert_same_index_file(dataset_uri, "zm_ours", "zm_theirs", "zonemap.lance")
    assert_same_index_file(dataset_uri, "bf_ours", "bf_theirs", "bloomfilter.lance")
    # fragments of 7000, 7000, 7000 and 3000 rows (less deletions): 7 + 7 + 7 + 3 zones
    assert lance.dataset(dataset_uri).stats.index_stats("zm_ours")["indices"] == [{"num_zones": 24, "rows_per_zone": 1000}]


@pytest.mark.parametrize("kind,columns,filters", [
    ("ZONEMAP", ["id", "x", "ts", "score", "cat"], ZONE_FILTERS),
    ("BLOOMFILTER", ["cat", "score", "id", "ts", "x", "email"], BLOOM_FILTERS),
])
def test_pylance_answers_from_our_index(dataset_uri, kind, columns, filters):
    ours = lance_format.dataset(dataset_uri)
    for column in columns:
        ours.create_scalar_index(column, kind)
    ds = lance.dataset(dataset_uri)
    assert {d.name for d in ds.describe_indices()} == {f"{c}_idx" for c in columns}
    used = 0
    for flt in filters:
        used += "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan()
        assert np.array_equal(_ids(ds, flt), _ids(ds, flt, use_scalar_index=False)), flt
    assert used >= len(filters) - 2  # pylance plans most of them with our indices


@pytest.mark.parametrize("kind,columns,filters", [
    ("ZONEMAP", ["id", "x", "ts", "score", "cat"], ZONE_FILTERS),
    ("BLOOMFILTER", ["cat", "score", "id", "ts", "x", "email"], BLOOM_FILTERS),
])
def test_we_answer_from_pylance_index(dataset_uri, kind, columns, filters):
    ds = lance.dataset(dataset_uri)
    for column in columns:
        ds.create_scalar_index(column, kind)
    ours = lance_format.dataset(dataset_uri)
    for flt in filters:
        plan = ours.scanner(filter=flt).explain_plan()
        expected = _ids(lance.dataset(dataset_uri), flt, use_scalar_index=False)
        assert np.array_equal(_ids(ours, flt), expected), flt
        assert np.array_equal(_ids(ours, flt, use_scalar_index=False), expected), flt
        assert "ScalarIndexQuery" in plan or flt.startswith("NOT"), flt


def _true_addresses(uri: str, flt: str) -> np.ndarray:
    table = lance.dataset(uri).to_table(columns=[], filter=flt, with_row_address=True, use_scalar_index=False)
    return np.sort(table.column("_rowaddr").to_numpy())


@pytest.mark.parametrize("column,query,flt", [
    ("id", q.Equals(pa.scalar(7001, pa.int64())), "id = 7001"),
    ("id", q.Range(pa.scalar(100, pa.int64()), pa.scalar(20000, pa.int64()), False, True), "id > 100 AND id <= 20000"),
    ("x", q.IsIn(pa.array([0.0, float("nan")])), "x = 0.0 OR isnan(x)"),
    ("x", q.Range(lower=pa.scalar(3.0)), "x > 3.0"),
    ("cat", q.StringPrefix("eps"), "cat LIKE 'eps%'"),
    ("ts", q.Range(upper=pa.scalar(np.datetime64("2024-02-01", "us"))), "ts <= TIMESTAMP '2024-02-01 00:00:00'"),
])
def test_pylance_zonemap_search_is_a_superset(dataset_uri, column, query, flt):
    lance.dataset(dataset_uri).create_scalar_index(column, "ZONEMAP")
    result = pylance_segment(dataset_uri, f"{column}_idx").search(query)
    assert result is not None and not result.exact
    truth = _true_addresses(dataset_uri, flt)
    assert len(truth) and np.isin(truth, result.rows).all()


def test_null_searches_are_exact(dataset_uri):
    ds = lance.dataset(dataset_uri)
    ds.create_scalar_index("x", "ZONEMAP")
    ds.create_scalar_index("cat", "BLOOMFILTER")
    for column, name in (("x", "x_idx"), ("cat", "cat_idx")):
        result = pylance_segment(dataset_uri, name).search(q.IsNull())
        table = lance.dataset(dataset_uri).to_table(columns=[], filter=f"{column} IS NULL", with_row_address=True,
                                                    use_scalar_index=False)
        # the null bitmap holds the rows at build time: deleted rows were left out of training
        assert result.exact and np.array_equal(result.rows, np.sort(table.column("_rowaddr").to_numpy()))


def test_bloom_search_prunes_zones(dataset_uri):
    lance.dataset(dataset_uri).create_scalar_index("score", "BLOOMFILTER")
    segment = pylance_segment(dataset_uri, "score_idx")
    assert segment.search(q.Equals(pa.scalar(5000, pa.int32()))).rows.size == 0
    hit = segment.search(q.IsIn(pa.array([17], pa.int32())))
    assert not hit.exact and np.isin(_true_addresses(dataset_uri, "score = 17"), hit.rows).all()


def test_appended_fragment_is_scanned(dataset_uri, table):
    ours = lance_format.dataset(dataset_uri)
    ours.create_scalar_index("id", "ZONEMAP")
    ours.create_scalar_index("cat", "BLOOMFILTER")
    lance_format.write_dataset(table.slice(0, 500), dataset_uri, mode="append")
    ours = lance_format.dataset(dataset_uri)
    for flt in ("id = 5", "cat = 'delta'"):
        expected = _ids(lance.dataset(dataset_uri), flt, use_scalar_index=False)
        assert np.array_equal(_ids(ours, flt), expected)
        assert np.array_equal(_ids(lance.dataset(dataset_uri), flt), expected)


def test_v2_0_table_files_equal_pylance(tmp_path, table):
    uri = str(tmp_path / "old.lance")
    lance.write_dataset(table.slice(0, 5000), uri, data_storage_version="2.0")
    lance.dataset(uri).create_scalar_index("x", "ZONEMAP", name="theirs")
    lance.dataset(uri).create_scalar_index("cat", "BLOOMFILTER", name="bf_theirs")
    lance_format.dataset(uri).create_scalar_index("x", "ZONEMAP", name="ours")
    lance_format.dataset(uri).create_scalar_index("cat", "BLOOMFILTER", name="bf_ours")
    assert_same_index_file(uri, "ours", "theirs", "zonemap.lance")
    assert_same_index_file(uri, "bf_ours", "bf_theirs", "bloomfilter.lance")


def test_bloomfilter_refuses_unsupported_types(dataset_uri):
    ours = lance_format.dataset(dataset_uri)
    for column in ("tags",):
        with pytest.raises(ValueError, match=f"Bloom filter index does not support data type.*column {column}"):
            ours.create_scalar_index(column, "BLOOMFILTER")
    with pytest.raises(ValueError):
        lance.dataset(dataset_uri).create_scalar_index("tags", "BLOOMFILTER")
    assert lance_format.dataset(dataset_uri).list_indices() == []


@pytest.mark.parametrize("params", [{"rows_per_zone": 0}, {"rows_per_zone": "many"}])
def test_zonemap_refuses_bad_parameters(dataset_uri, params):
    with pytest.raises(InvalidInputError, match="rows_per_zone must be a positive integer"):
        lance_format.dataset(dataset_uri).create_scalar_index("id", "ZONEMAP", **params)


def test_bloomfilter_refuses_bad_probability(dataset_uri):
    with pytest.raises(InvalidInputError, match="probability must be a number between 0 and 1"):
        lance_format.dataset(dataset_uri).create_scalar_index("id", "BLOOMFILTER", probability=1.5)


def test_hashing_and_filter_sizes():
    # xxHash64 reference values (seed 0)
    assert hash_binary(pa.array([""]))[0] == 17241709254077376921
    assert hash_binary(pa.array(["abc"]))[0] == 0x44BC2CF5AD770999
    assert hash_fixed(np.array([0], dtype=np.int64))[0] == hash_binary(pa.array([b"\0" * 8], pa.binary()))[0]
    long_text = "x" * 100
    assert hash_binary(pa.array([long_text]))[0] == hash_binary(pa.array(["pad", long_text]).slice(1))[0]
    assert sbbf.filter_bytes(8192, 0.00057) == 32768
    data = sbbf.build(hash_fixed(np.arange(100, dtype=np.int64)), 256)
    assert sbbf.might_contain(data, hash_fixed(np.arange(100, dtype=np.int64))).all()
    assert sbbf.might_contain(data, hash_fixed(np.arange(10_000, 11_000, dtype=np.int64))).mean() < 0.2


def test_store_reads_what_it_wrote(dataset_uri):
    lance_format.dataset(dataset_uri).create_scalar_index("x", "ZONEMAP")
    info = lance.dataset(dataset_uri).list_indices()[0]
    store = store_for(dataset_uri, info["uuid"])
    assert store.schema_metadata("zonemap.lance")["rows_per_zone"] == "8192"
