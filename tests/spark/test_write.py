"""Tables written from Spark read identically in official Lance (pylance)."""

from __future__ import annotations

import shutil

import lance
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import lance_format
from lance_format.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lance_format.spark import merge_dataframe, read_dataframe, write_dataframe

from .helpers import lance_rows, spark_rows


def _frame(spark, start: int, stop: int, label: str = "v", partitions: int = 2):
    return spark.range(start, stop, 1, partitions).select(
        "id",
        (F.col("id") * F.lit(0.5)).cast("double").alias("x"),
        F.concat(F.lit(label), F.col("id").cast("string")).alias("s"),
    )


def test_create_append_overwrite_read_by_pylance(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    first = write_dataframe(_frame(spark, 0, 5000), uri, max_rows_per_file=1000)
    assert (first.version, first.rows, first.operation, first.read_version) == (1, 5000, "overwrite", 0)
    assert first.fragments >= 5 and first.bytes > 0
    ds = lance.dataset(uri)
    assert ds.schema == pa.schema([pa.field("id", pa.int64(), False), pa.field("x", pa.float64(), False),
                                   pa.field("s", pa.string(), False)])
    assert lance_rows(uri) == spark_rows(_frame(spark, 0, 5000))

    second = write_dataframe(_frame(spark, 5000, 6000), uri, mode="append")
    assert (second.version, second.rows, second.operation) == (2, 1000, "append")
    assert lance_rows(uri) == spark_rows(_frame(spark, 0, 6000))
    assert lance_rows(uri, version=1) == spark_rows(_frame(spark, 0, 5000))

    third = write_dataframe(_frame(spark, 10, 20, "w"), uri, mode="overwrite")
    assert third.version == 3 and lance.dataset(uri).count_rows() == 10
    assert lance_rows(uri) == spark_rows(_frame(spark, 10, 20, "w"))
    # read back through Spark: the same rows at every version
    for version, expected in ((1, _frame(spark, 0, 5000)), (3, _frame(spark, 10, 20, "w"))):
        assert spark_rows(read_dataframe(spark, uri, version=version)) == spark_rows(expected)


def test_modes(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri, mode="append")  # append creates a missing table
    with pytest.raises(DatasetAlreadyExistsError):
        write_dataframe(_frame(spark, 0, 10), uri)
    with pytest.raises(DatasetAlreadyExistsError):
        write_dataframe(_frame(spark, 0, 10), uri, mode="error")
    skipped = write_dataframe(_frame(spark, 0, 10), uri, mode="ignore")
    assert skipped.skipped and skipped.version == 1 and lance.dataset(uri).version == 1
    empty = write_dataframe(_frame(spark, 0, 0), uri, mode="append")
    assert empty.skipped and lance.dataset(uri).version == 1  # an empty append commits nothing
    with pytest.raises(InvalidInputError):
        write_dataframe(_frame(spark, 0, 10), uri, mode="upsert")
    # an empty DataFrame creates an empty table with its schema
    empty_uri = str(tmp_path / "empty.lance")
    created = write_dataframe(_frame(spark, 0, 0), empty_uri)
    assert created.version == 1 and created.rows == 0
    assert lance.dataset(empty_uri).count_rows() == 0 and lance.dataset(empty_uri).schema.names == ["id", "x", "s"]


def test_odd_column_names_and_column_order(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    df = spark.createDataFrame([(1, "a", 0.5)], "id long, `a-b` string, `my col` double")
    write_dataframe(df, uri)
    write_dataframe(df.select("`my col`", "id", "`a-b`"), uri, mode="append")  # by name, any order
    assert lance.dataset(uri).schema.names == ["id", "a-b", "my col"]
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 1, "a-b": "a", "my col": 0.5}] * 2
    back = read_dataframe(spark, uri, columns=["a-b"], filter="`my col` > 0")
    assert [r["a-b"] for r in back.collect()] == ["a", "a"]


def test_dotted_top_level_names_are_refused_before_any_task(spark, tmp_path):
    # Lance reads "a.b" as field b of struct a: official Lance refuses such a table, and so do we.
    uri = str(tmp_path / "t.lance")
    df = spark.createDataFrame([(1, "a")], "id long, `a.b` string")
    with pytest.raises(InvalidInputError, match="cannot contain '.'"):
        write_dataframe(df, uri)
    assert not (tmp_path / "t.lance").exists()
    write_dataframe(df.select("id"), uri)
    with pytest.raises(InvalidInputError, match="cannot contain '.'"):
        write_dataframe(df, uri, mode="append", schema_mode="add_columns")
    assert lance.dataset(uri).schema.names == ["id"] and lance.dataset(uri).version == 1


def test_schema_checks(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    wrong = _frame(spark, 0, 10).withColumn("x", F.col("x").cast("string"))
    with pytest.raises(SchemaMismatchError, match="'x'"):
        write_dataframe(wrong, uri, mode="append")
    with pytest.raises(SchemaMismatchError, match="lacks columns"):
        write_dataframe(_frame(spark, 0, 10).drop("s"), uri, mode="append")
    with pytest.raises(SchemaMismatchError, match="add_columns"):
        write_dataframe(_frame(spark, 0, 10).withColumn("extra", F.lit(1)), uri, mode="append")
    # a full overwrite may change the schema only when asked to
    with pytest.raises(SchemaMismatchError):
        write_dataframe(wrong, uri, mode="overwrite")
    done = write_dataframe(wrong, uri, mode="overwrite", schema_mode="overwrite")
    assert lance.dataset(uri).schema.field("x").type == pa.string() and done.version == 2


def test_add_columns(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    wider = _frame(spark, 10, 15).withColumn("tag", F.lit("new"))
    result = write_dataframe(wider, uri, mode="append", schema_mode="add_columns")
    ds = lance.dataset(uri)
    assert ds.schema.names == ["id", "x", "s", "tag"] and ds.schema.field("tag").nullable
    rows = lance_rows(uri)
    assert [r["tag"] for r in rows] == [None] * 10 + ["new"] * 5
    assert result.version == ds.version == 2 and result.operation == "merge"  # ONE commit: columns and rows
    assert lance_format.dataset(uri).read_transaction_message().WhichOneof("operation") == "merge"
    assert spark_rows(read_dataframe(spark, uri)) == rows


def test_add_columns_with_replace_where_is_one_commit(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 20), uri, max_rows_per_file=10)
    wider = _frame(spark, 5, 10, "new").withColumn("tag", F.lit("t"))
    result = write_dataframe(wider, uri, mode="overwrite", replace_where="id >= 5 AND id < 10",
                             schema_mode="add_columns")
    assert result.version == lance.dataset(uri).version == 2
    rows = sorted(lance_rows(uri), key=lambda r: r["id"])
    assert [r["tag"] for r in rows] == [None] * 5 + ["t"] * 5 + [None] * 10
    assert [r["s"] for r in rows[5:10]] == [f"new{i}" for i in range(5, 10)]


def test_replace_where(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 100), uri, max_rows_per_file=30)
    result = write_dataframe(_frame(spark, 0, 30, "new"), uri, mode="overwrite", replace_where="id < 30")
    assert (result.operation, result.rows, result.rows_deleted) == ("update", 30, 30)
    txn = lance_format.dataset(uri).read_transaction_message()
    assert txn.WhichOneof("operation") == "update" and list(txn.update.removed_fragment_ids) == [0]
    expected = spark_rows(_frame(spark, 0, 30, "new").union(_frame(spark, 30, 100)))
    assert lance_rows(uri) == expected
    assert spark_rows(read_dataframe(spark, uri)) == expected
    # a partial fragment gets a deletion vector pylance honours
    write_dataframe(_frame(spark, 45, 50, "p"), uri, mode="overwrite", replace_where="id >= 45 AND id < 50")
    assert [r["s"] for r in lance_rows(uri) if 45 <= r["id"] < 50] == ["p45", "p46", "p47", "p48", "p49"]
    assert lance.dataset(uri).count_rows() == 100
    with pytest.raises(InvalidInputError, match="do not satisfy"):
        write_dataframe(_frame(spark, 60, 70), uri, mode="overwrite", replace_where="id < 30")
    with pytest.raises(InvalidInputError):
        write_dataframe(_frame(spark, 0, 1), uri, mode="append", replace_where="id < 30")


def _pylance_merge(uri: str, source: pa.Table, delete: bool = False) -> None:
    builder = lance.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    if delete:
        builder = builder.when_not_matched_by_source_delete()
    builder.execute(source)


@pytest.mark.parametrize("stable", [False, True])
def test_merge_matches_pylance(spark, tmp_path, stable):
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    write_dataframe(_frame(spark, 0, 40), ours, max_rows_per_file=15, enable_stable_row_ids=stable)
    shutil.copytree(ours, theirs)
    source = _frame(spark, 30, 50, "m")
    result = merge_dataframe(source, ours, "id")
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (10, 10, 0)
    _pylance_merge(theirs, source.toArrow())
    system = {"with_row_id": True} if stable else {}
    mine, reference = lance_rows(ours, **system), lance_rows(theirs, **system)
    assert mine == reference
    if stable:
        lineage = ["id", "_row_created_at_version", "_row_last_updated_at_version"]
        assert lance_rows(ours, columns=lineage) == lance_rows(theirs, columns=lineage)
    # and with deletion of target rows missing from the source
    source = _frame(spark, 35, 45, "d")
    result = merge_dataframe(source, ours, "id", when_not_matched_by_source="delete")
    _pylance_merge(theirs, source.toArrow(), delete=True)
    assert lance_rows(ours, **system) == lance_rows(theirs, **system)
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (10, 0, 40)


@pytest.mark.parametrize("how", ["left_outer", "full_outer", "left"])
def test_merge_joins_broadcast_only_small_tables(spark, tmp_path, how):
    """A table read has no size estimate, so Spark would always broadcast it (every target key
    collected on the driver): the merge decides from the table's row count instead."""
    from lance_format.spark.merge import join_with_table

    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 50_000), uri)
    table_rows = read_dataframe(spark, uri, columns=["id"], with_row_address=True)
    source = _frame(spark, 49_990, 50_010, "m").select("id", "s")
    for rows, broadcast in ((50_000, how != "full_outer"), (10**9, False)):
        joined = join_with_table(source, table_rows, ["id"], how, table_rows_count=rows)
        plan = joined._jdf.queryExecution().executedPlan().toString()
        assert ("BroadcastHashJoin" in plan) == broadcast and ("SortMergeJoin" in plan) != broadcast, plan
        assert joined.count() == (50_010 if how == "full_outer" else 20)
        assert joined.where("_rowaddr IS NOT NULL AND s IS NOT NULL").count() == 10


def test_merge_options_and_errors(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri)
    keep = merge_dataframe(_frame(spark, 5, 15, "n"), uri, ["id"], when_matched="do_nothing")
    assert (keep.rows_updated, keep.rows_inserted) == (0, 5)
    assert [r["s"] for r in lance_rows(uri)] == [f"v{i}" for i in range(10)] + [f"n{i}" for i in range(10, 15)]
    only = merge_dataframe(_frame(spark, 0, 20, "u"), uri, "id", when_not_matched="do_nothing")
    assert (only.rows_updated, only.rows_inserted) == (15, 0) and lance.dataset(uri).count_rows() == 15
    with pytest.raises(InvalidInputError, match="fail"):
        merge_dataframe(_frame(spark, 14, 16, "f"), uri, "id", when_matched="fail")
    version = lance.dataset(uri).version
    duplicated = _frame(spark, 0, 3).union(_frame(spark, 2, 3))
    with pytest.raises(InvalidInputError, match="unique"):
        merge_dataframe(duplicated, uri, "id")
    with pytest.raises(InvalidInputError):
        merge_dataframe(_frame(spark, 0, 3), uri, "nope")
    assert lance.dataset(uri).version == version
    with pytest.raises(lance_format.DatasetNotFoundError):
        merge_dataframe(_frame(spark, 0, 3), str(tmp_path / "missing.lance"), "id")


def test_merge_delete_options_match_pylance(spark, tmp_path):
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    write_dataframe(_frame(spark, 0, 30), ours, max_rows_per_file=10)
    shutil.copytree(ours, theirs)
    source = _frame(spark, 5, 8, "m")
    result = merge_dataframe(source, ours, "id", when_matched="delete", when_not_matched="do_nothing")
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (0, 0, 3)
    lance.dataset(theirs).merge_insert("id").when_matched_delete().execute(source.toArrow())
    assert lance_rows(ours) == lance_rows(theirs)
    source = _frame(spark, 10, 12, "u")
    result = merge_dataframe(source, ours, "id", delete_not_matched_by_source="id >= 25")
    assert (result.rows_updated, result.rows_inserted, result.rows_deleted) == (2, 0, 5)
    (lance.dataset(theirs).merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
     .when_not_matched_by_source_delete("id >= 25").execute(source.toArrow()))
    assert lance_rows(ours) == lance_rows(theirs)
    assert [r["id"] for r in lance_rows(ours)] == [0, 1, 2, 3, 4] + list(range(8, 25))


def test_stable_row_ids_append(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    write_dataframe(_frame(spark, 0, 10), uri, enable_stable_row_ids=True)
    write_dataframe(_frame(spark, 10, 20), uri, mode="append")
    expected = lance_rows(uri, columns=["id"], with_row_id=True)
    assert [r["_rowid"] for r in expected] == list(range(20))
    assert spark_rows(read_dataframe(spark, uri, columns=["id"], with_row_id=True)) == expected


def test_map_column_written_from_spark_reads_back_in_pylance(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    df = spark.createDataFrame(
        [(1, {"a": 1, "b": None}, {"x": {"k": [1, 2]}}), (2, None, {}), (3, {}, None), (4, {"c": 3}, {"y": None})],
        "id long, m map<string,int>, n map<string,map<string,array<int>>>",
    ).repartition(2)
    result = write_dataframe(df, uri, max_rows_per_file=2)
    assert result.rows == 4 and lance.dataset(uri).data_storage_version == "2.2"
    ds = lance.dataset(uri)
    assert ds.schema.field("m").type == pa.map_(pa.string(), pa.int32())
    fields = [(f.name, f.id, f.parent_id, f.logical_type) for f in lance_format.dataset(uri).lance_schema.walk()]
    assert fields[1:5] == [("m", 1, -1, "map"), ("entries", 2, 1, "struct"), ("key", 3, 2, "string"),
                           ("value", 4, 2, "int32")]
    rows = lance_rows(uri)
    assert [(r["id"], r["m"]) for r in rows] == [(1, [("a", 1), ("b", None)]), (2, None), (3, []), (4, [("c", 3)])]
    assert [r["n"] for r in rows] == [[("x", [("k", [1, 2])])], [], None, [("y", None)]]
    # and Spark reads back what it wrote (maps of maps included)
    back = {r["id"]: r for r in read_dataframe(spark, uri).collect()}
    assert back[1]["m"] == {"a": 1, "b": None} and back[1]["n"] == {"x": {"k": [1, 2]}}
    assert back[2]["m"] is None and back[3]["m"] == {} and back[4]["n"] == {"y": None}


def test_map_columns_before_file_version_2_2_are_refused_on_the_driver(spark, tmp_path):
    uri = str(tmp_path / "t.lance")
    df = spark.createDataFrame([(1, {"a": 1})], "id long, m map<string,int>")

    def explode(batches):  # a task that runs at all fails with this message instead
        raise RuntimeError("a task ran")
        yield  # pragma: no cover

    failing = df.mapInArrow(explode, df.schema)
    for version in ("2.0", "2.1"):
        with pytest.raises(UnsupportedFeatureError, match="map column 'm'.*2.2") as info:
            write_dataframe(failing, uri, data_storage_version=version)
        assert info.value.table is not None
    assert not (tmp_path / "t.lance").exists()
