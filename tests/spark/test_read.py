"""Spark reads of Lance tables: pylance-written tables at every version, splits, types."""

from __future__ import annotations

import datetime as dt
import decimal

import lance
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

import lance_format
from lance_format.errors import InvalidInputError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.spark import read_dataframe, write_dataframe
from lance_format.spark.read import plan_splits
from lance_format.spark.types import spark_arrow_schema

from ..type_matrix import type_matrix
from .helpers import lance_rows, sorted_table, spark_rows


def _as_spark_sees(table: pa.Table, df, key: str = "id") -> list[dict]:
    """pylance's rows converted to the Arrow types Spark holds them in (sorted by ``key``)."""
    target = spark_arrow_schema(df.schema)
    arrays = [table.column(f.name).cast(f.type, safe=False) for f in target]
    converted = pa.Table.from_arrays(arrays, schema=target)
    return converted.sort_by(key).to_pylist()


def _matrix(n: int, start: int) -> pa.Table:
    table = type_matrix(n).drop_columns(["decimal256", "decimal256_nulls"])  # Spark: 38 digits at most
    return table.add_column(0, "id", pa.array(np.arange(start, start + n), pa.int64()))


@pytest.mark.parametrize("file_version", ["2.0", "2.2"])
def test_pylance_tables_at_every_version(spark, tmp_path, file_version):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_matrix(60, 0), uri, data_storage_version=file_version, max_rows_per_file=25)
    ds = lance.dataset(uri)
    ds.delete("id % 7 = 3")
    lance.write_dataset(_matrix(30, 1000), uri, mode="append", max_rows_per_file=20)
    lance.dataset(uri).delete("id >= 1010 AND id < 1015 OR id = 5")
    for version in range(1, lance.dataset(uri).version + 1):
        expected = lance.dataset(uri, version=version).to_table()
        df = read_dataframe(spark, uri, version=version)
        assert spark_rows(df) == _as_spark_sees(expected, df), f"version {version}"
    # projection, filter and system columns are evaluated by the engine, like pylance's
    wanted = ["id", "string", "struct", "vector"]
    df = read_dataframe(spark, uri, columns=wanted, filter="int32 > 0 AND id % 2 = 0", with_row_address=True)
    expected = lance.dataset(uri).to_table(columns=wanted, filter="int32 > 0 AND id % 2 = 0", with_row_address=True)
    assert df.columns == wanted + ["_rowaddr"]
    assert spark_rows(df) == _as_spark_sees(expected, df)


def _live_rows(uri: str, split) -> int:
    ds = lance.dataset(uri)
    fragments = {f.fragment_id: f for f in ds.get_fragments()}
    return sum(fragments[f].scanner(columns=[], with_row_address=True).to_table()
               .filter(pa.compute.field("_rowaddr").isin(
                   [(f << 32) + i for i in range(begin, end)])).num_rows
               for f, begin, end in split)


def test_splits_are_equal_cuts_of_the_live_rows(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    table = pa.table({"id": pa.array(np.arange(10_000), pa.int64())})
    lance.write_dataset(table, uri, max_rows_per_file=6_000, data_storage_version="2.0")
    lance.write_dataset(pa.table({"id": pa.array(np.arange(10_000, 10_050), pa.int64())}), uri, mode="append",
                        max_rows_per_file=10)
    lance.dataset(uri).delete("id % 3 = 0")
    ds = lance_format.dataset(uri)
    # 6,700 live rows (fragments of 4000 and 2667 live rows, then five of about 7) in splits of
    # at most 2,000: four equal cuts, which may cross fragment edges; the 10-row fragments are
    # never cut (a piece would be below a quarter of a split)
    splits = plan_splits(ds, target_splits=1, rows_per_split=2_000)
    assert splits == [
        ((0, 0, 2512),), ((0, 2512, 5025),), ((0, 5025, 6000), (1, 0, 1538)),
        ((1, 1538, 4000),) + tuple((i, 0, 10) for i in range(2, 7)),
    ]
    assert all(1_600 <= _live_rows(uri, split) <= 1_750 for split in splits)
    # a multiple of the tasks the session runs at once, covering every physical row once, in order
    three = plan_splits(ds, target_splits=3, rows_per_split=2_000)
    assert len(three) == 6
    pieces = [piece for split in three for piece in split]
    for fragment in ds.manifest.fragments:
        ranges = [(b, e) for f, b, e in pieces if f == fragment.id]
        assert ranges[0][0] == 0 and ranges[-1][1] == fragment.physical_rows
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert [f for f, _, _ in pieces] == sorted(f for f, _, _ in pieces)
    # a small table is one split
    assert plan_splits(ds, target_splits=2) == [tuple((f.id, 0, f.physical_rows) for f in ds.manifest.fragments)]
    df = read_dataframe(spark, uri, rows_per_split=2_000)
    assert df.rdd.getNumPartitions() == len(plan_splits(ds, target_splits=2, rows_per_split=2_000)) == 4
    assert spark_rows(df) == lance_rows(uri)


def test_three_fragments_on_two_cores_are_four_equal_splits(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(np.arange(300_000), pa.int64())}), uri,
                               max_rows_per_file=100_000)
    splits = plan_splits(lance_format.dataset(uri), target_splits=2, rows_per_split=100_000)
    assert splits == [((0, 0, 75_000),), ((0, 75_000, 100_000), (1, 0, 50_000)),
                      ((1, 50_000, 100_000), (2, 0, 25_000)), ((2, 25_000, 100_000),)]


def test_unrepresentable_types_are_refused(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1], "d": pa.array([decimal.Decimal("1.5")], pa.decimal256(40, 1))}), uri,
                        data_storage_version="2.0")
    with pytest.raises(UnsupportedFeatureError, match="'d'"):
        read_dataframe(spark, uri)
    assert spark_rows(read_dataframe(spark, uri, columns=["id"])) == [{"id": 1}]
    with pytest.raises(InvalidInputError, match="nope"):
        read_dataframe(spark, uri, columns=["nope"])
    with pytest.raises(InvalidInputError):
        read_dataframe(spark, uri, filter="id >>> 3")


def _typed_frame(spark):
    schema = T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("b", T.BooleanType()),
        T.StructField("i8", T.ByteType()),
        T.StructField("i16", T.ShortType()),
        T.StructField("i32", T.IntegerType()),
        T.StructField("f32", T.FloatType()),
        T.StructField("dec", T.DecimalType(12, 3)),
        T.StructField("dec38", T.DecimalType(38, 10)),
        T.StructField("s", T.StringType()),
        T.StructField("big", T.StringType(), metadata={"arrow.large_var_char": "true"}),
        T.StructField("bin", T.BinaryType()),
        T.StructField("d", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("arr", T.ArrayType(T.StringType())),
        T.StructField("vec", T.ArrayType(T.FloatType(), False), metadata={"arrow.fixed-size-list.size": 3}),
        T.StructField("emb", T.ArrayType(T.DoubleType(), False)),
        T.StructField("st", T.StructType([T.StructField("a", T.IntegerType()), T.StructField("t", T.TimestampType()),
                                          T.StructField("l", T.ArrayType(T.LongType()))])),
    ])
    rows = []
    for i in range(6):
        rows.append((
            i, i % 2 == 0, i, i * 100, i * 100_000, i / 4, decimal.Decimal(i) / 8, decimal.Decimal(10**20 + i),
            f"s{i}", "x" * i, bytes([i]) * i, dt.date(2024, 1, 1 + i),
            dt.datetime(2024, 3, 10, 1 + i, 30, tzinfo=dt.UTC), dt.datetime(2024, 3, 10, 1 + i, 30),
            [f"a{j}" for j in range(i)] if i != 3 else None, [float(i), 1.0, 2.0], [0.5 * i, 1.5],
            {"a": i, "t": dt.datetime(2020, 1, 1, i, tzinfo=dt.UTC), "l": list(range(i))},
        ))
    rows[2] = tuple(None if k not in (0, 15, 16) else v for k, v in enumerate(rows[2]))
    return spark.createDataFrame(rows, schema)


def test_types_round_trip_without_shift(spark, tmp_path, session_conf):
    uri = str(tmp_path / "t.lance")
    # A non-UTC session: tz-aware values must stay the same instants, naive ones the same wall times.
    with session_conf({"spark.sql.session.timeZone": "America/New_York"}):
        df = _typed_frame(spark)
        write_dataframe(df, uri, fixed_size_lists={"emb": 2})
        schema = lance.dataset(uri).schema
        assert schema.field("ts").type == pa.timestamp("us", tz="UTC")
        assert schema.field("ntz").type == pa.timestamp("us")
        assert schema.field("big").type == pa.large_string()
        assert schema.field("vec").type == pa.list_(pa.float32(), 3)  # Lance keeps no element nullability
        assert schema.field("emb").type == pa.list_(pa.float64(), 2)
        assert schema.field("dec38").type == pa.decimal128(38, 10)
        stored = lance.dataset(uri).to_table().sort_by("id").to_pylist()
        assert stored[1]["ts"] == dt.datetime(2024, 3, 10, 2, 30, tzinfo=dt.UTC)
        assert stored[1]["ntz"] == dt.datetime(2024, 3, 10, 2, 30)
        assert stored[2]["s"] is None and stored[3]["arr"] is None and stored[4]["vec"] == [4.0, 1.0, 2.0]
        back = read_dataframe(spark, uri)
        assert back.schema["vec"].metadata == {"arrow.fixed-size-list.size": 3}
        assert back.schema["big"].metadata == {"arrow.large_var_char": "true"}
        assert spark_rows(back) == spark_rows(df)
        # read -> write keeps the vector and large-string types through the field metadata
        copy = str(tmp_path / "copy.lance")
        write_dataframe(back, copy)
        assert lance.dataset(copy).schema == schema


def test_vector_length_and_nulls_are_checked(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    bad = spark.createDataFrame([(1, [1.0, 2.0]), (2, [1.0])], "id long, v array<double>")
    with pytest.raises(SchemaMismatchError, match="'v'"):
        write_dataframe(bad, uri, fixed_size_lists={"v": 2})
    assert not (tmp_path / "t.lance" / "_versions").exists()
    write_dataframe(spark.createDataFrame([(1, "a")], "id long not null, s string not null"), uri)
    nulls = spark.createDataFrame([(2, None)], "id long, s string")
    with pytest.raises(SchemaMismatchError, match="column 's' is not nullable"):
        write_dataframe(nulls, uri, mode="append")
    assert lance.dataset(uri).version == 1


def test_maps_refused_in_file_version_2_0(spark, tmp_path):
    df = spark.createDataFrame([(1, {"a": 1})], "id long, m map<string,int>")
    with pytest.raises(UnsupportedFeatureError, match="'m'"):
        write_dataframe(df, str(tmp_path / "t.lance"), data_storage_version="2.0")
    assert not (tmp_path / "t.lance" / "_versions").exists()


def test_maps_round_trip_in_file_version_2_2(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2], "m": pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int32()))}),
                        uri, data_storage_version="2.2")
    assert spark_rows(read_dataframe(spark, uri)) == [{"id": 1, "m": [("a", 1)]}, {"id": 2, "m": None}]
    df = spark.createDataFrame([(11, {"b": 2})], "id long, m map<string,int>")
    write_dataframe(df, uri, mode="append")
    assert lance_rows(uri)[2] == {"id": 11, "m": [("b", 2)]}


@pytest.mark.parametrize("file_version", ["2.0", "2.2"])
def test_filtered_splits_read_filter_columns_first_and_match_pylance(spark, tmp_path, file_version):
    """Filters are late-materialized inside each split's row range (sparse filters take the
    passing rows' other columns, dense ones read them); the rows are pylance's."""
    uri = str(tmp_path / "t.lance")
    n = 12_000
    ids = np.arange(n)
    table = pa.table({
        "id": pa.array(ids, pa.int64()),
        "cat": pa.array(np.array(["a", "b", "c", "d"])[ids % 4]),
        "s": pa.array([f"user-{i}@example.com" if i % 5 else None for i in ids]),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in ids], pa.list_(pa.string())),
        "point": pa.StructArray.from_arrays([pa.array(ids * 0.5), pa.array(ids % 7, pa.int32())], ["lat", "zone"]),
    })
    lance.write_dataset(table, uri, data_storage_version=file_version, max_rows_per_file=5_000)
    lance.dataset(uri).delete("id % 11 = 4 OR (id >= 3000 AND id < 3500)")
    ds = lance_format.dataset(uri)
    assert len(plan_splits(ds, rows_per_split=1_500)) >= 7  # cuts inside fragments
    # sparse (taken), dense (read in ranges), a nested column and nulls in the filter
    for where in ("id % 97 = 1", "cat <> 'b' AND id % 3 <> 0", "point.zone = 2 AND s IS NULL"):
        for columns, with_row_id in ((None, False), (["s", "tags"], True)):
            df = read_dataframe(spark, uri, filter=where, columns=columns, with_row_id=with_row_id,
                                rows_per_split=1_500, batch_size=700)
            expected = lance.dataset(uri).to_table(filter=where, columns=columns, with_row_id=with_row_id)
            key = "id" if "id" in expected.column_names else "_rowid"
            assert df.columns == expected.column_names, (where, columns)
            assert sorted_table(df.toArrow(), key).to_pylist() == \
                _as_spark_sees(sorted_table(expected, key), df, key), (where, columns)


def test_a_selective_filter_takes_only_the_passing_rows_other_columns(tmp_path, monkeypatch):
    from lance_format.dataset.fragment import LanceFragment
    from lance_format.spark.read import plan_read
    from lance_format.spark.tasks import read_split

    uri = str(tmp_path / "t.lance")
    ids = np.arange(20_000)
    lance_format.write_dataset(pa.table({"id": ids, "s": pa.array([f"row {i}" for i in ids])}), uri,
                               data_storage_version="2.2")
    taken: list[int] = []
    take_physical = LanceFragment.take_physical

    def counting(self, schema, system_columns, offsets):
        taken.append(len(offsets))
        return take_physical(self, schema, system_columns, offsets)

    monkeypatch.setattr(LanceFragment, "take_physical", counting)

    def read(where: str) -> list[int]:
        plan = plan_read(uri, filter=where, batch_size=1_000)
        return [i for split in plan.splits for b in read_split(plan.spec, split) for i in b.column("id").to_pylist()]

    assert read("id % 1000 = 7") == list(range(7, 20_000, 1000))
    assert sum(taken) == 20  # only the 20 passing rows' "s" was decoded
    taken.clear()
    assert read("id % 2 = 0") == list(range(0, 20_000, 2))
    assert taken == []  # most rows pass: "s" is read in ranges, not taken


def test_batches_are_sized_by_rows_and_by_the_table_bytes_per_row(spark, tmp_path):
    from lance_format.spark.read import DEFAULT_BATCH_SIZE, DEFAULT_BYTES_PER_BATCH, batch_rows, plan_read
    from lance_format.spark.tasks import read_split

    narrow = str(tmp_path / "narrow.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(np.arange(300_000), pa.int64())}), narrow)
    plan = plan_read(narrow, target_splits=1)
    assert plan.spec.batch_size == DEFAULT_BATCH_SIZE
    assert [b.num_rows for s in plan.splits for b in read_split(plan.spec, s)] == [65_536] * 4 + [37_856]
    assert plan_read(narrow, batch_size=1_000).spec.batch_size == 1_000  # asked for: as asked

    wide = str(tmp_path / "wide.lance")  # 16 KiB of floats per row: 2,048 rows hold 32 MiB
    rng = np.random.default_rng(0)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(3_000 * 4_096, dtype=np.float32)), 4_096)
    lance_format.write_dataset(pa.table({"id": pa.array(np.arange(3_000), pa.int64()), "v": vectors}), wide)
    rows = batch_rows(lance_format.dataset(wide))
    assert 1_900 < rows <= DEFAULT_BYTES_PER_BATCH // (4_096 * 4)
    plan = plan_read(wide, target_splits=1)
    assert plan.spec.batch_size == rows
    assert max(b.num_rows for s in plan.splits for b in read_split(plan.spec, s)) == rows
    df = spark.read.format("lance").load(wide)
    assert df.count() == 3_000 and df.selectExpr("sum(id)").first()[0] == sum(range(3_000))
    with pytest.raises(InvalidInputError, match="positive"):
        plan_read(narrow, batch_size=0)


def test_a_task_with_one_core_decodes_its_split_on_its_own_thread(spark, tmp_path):
    from lance_format.spark.read import plan_read

    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(np.arange(50_000), pa.int64()),
                                         "s": pa.array([f"row {i}" for i in range(50_000)])}), uri,
                               data_storage_version="2.2")
    plan = plan_read(uri, batch_size=10_000)
    spec, splits = plan.spec, plan.splits

    def pools_used(batches):  # runs in a Spark task (pickled by value)
        import lance_format.io.decode_pool as threads
        from lance_format.spark.tasks import read_split

        seen: list[bool] = []
        original = threads.decode_pool

        def recording():
            pool = original()
            seen.append(pool is not None)
            return pool

        threads.decode_pool = recording
        try:
            rows = sum(b.num_rows for _ in batches for split in splits for b in read_split(spec, split))
        finally:
            threads.decode_pool = original
        yield pa.record_batch([pa.array([rows]), pa.array([sum(seen)]), pa.array([len(seen)])],
                              names=["rows", "pooled", "calls"])

    result = spark.range(0, 1, 1, 1).mapInArrow(pools_used, "rows long, pooled long, calls long").first()
    assert result.rows == 50_000 and result.calls > 0 and result.pooled == 0
