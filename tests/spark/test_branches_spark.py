"""Spark on branches and shallow clones (#12 part 2): reads, appends and ``replace_where``
through a branch's tree, whose fragments keep their data and deletions in the main table."""

from __future__ import annotations

import lance
import pyarrow as pa

from lance_format.spark import read_dataframe, write_dataframe


def _ids(rows) -> list[int]:
    return sorted(r["id"] for r in rows)


def test_spark_reads_and_writes_a_pylance_branch(spark, tmp_path):
    root = str(tmp_path / "t")
    lance.write_dataset(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]}), root)
    lance.dataset(root).delete("id = 1")  # the branch reaches this deletion file through its base
    lance.dataset(root).create_branch("dev")
    branch = f"{root}/tree/dev"
    assert _ids(read_dataframe(spark, branch).collect()) == [2, 3, 4]
    df = spark.createDataFrame([(5, "e"), (3, "C")], "id long, v string")
    write_dataframe(df, branch, mode="append")
    write_dataframe(spark.createDataFrame([(2, "B")], "id long, v string"), branch, mode="overwrite",
                    replace_where="id = 2 OR id = 4")
    theirs = lance.dataset(root).checkout_version(("dev", None)).to_table()
    assert sorted(zip(theirs["id"].to_pylist(), theirs["v"].to_pylist())) == [
        (2, "B"), (3, "C"), (3, "c"), (5, "e")]
    assert _ids(read_dataframe(spark, branch).collect()) == [2, 3, 3, 5]
    assert sorted(lance.dataset(root).to_table()["id"].to_pylist()) == [2, 3, 4]  # main untouched
