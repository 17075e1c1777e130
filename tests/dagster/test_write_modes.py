"""The same write-mode scenarios through the pyarrow path and the Spark path: same rows, same
metadata, same errors (lance_assets/write_modes.py decides for both; only how rows are written
differs)."""

from __future__ import annotations

import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager, SparkSessionResource
from lance_assets.config import MergeOptions
from lance_assets.write_modes import scoped_delete_by_source
from lance_format.errors import DatasetAlreadyExistsError, SchemaMismatchError

pytest.importorskip("pyspark.sql")

PARTS = dg.StaticPartitionsDefinition(["a", "b"])
SCHEMA = "id long, p string, v string"
STAT_KEYS = ("lance/rows_inserted", "lance/rows_updated", "lance/rows_deleted", "dagster/partition_row_count",
             "dagster/row_count", "lance/version", "lance/write_mode", "lance/skipped", "lance/merge_on")


def _frame(engine: str, rows: list[tuple], columns: str = SCHEMA):
    names = [c.split()[0] for c in columns.split(",")]
    if engine == "spark":
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession().createDataFrame(rows, columns)
    types = {"long": pa.int64(), "string": pa.string()}
    fields = [pa.field(n, types[c.split()[1]]) for n, c in zip(names, columns.split(","))]
    return pa.Table.from_pylist([dict(zip(names, r)) for r in rows], schema=pa.schema(fields))


class Scenario:
    """One asset ``t`` written by one engine: each ``run`` materializes it with new rows/metadata."""

    def __init__(self, engine: str, root: str, instance: dg.DagsterInstance) -> None:
        self.engine, self.root, self.instance = engine, root, instance
        self.resources = {"io_manager": LanceIOManager(base_uri=root, spark=SparkSessionResource(master="local[2]"))}

    def run(self, rows: list[tuple], meta: dict, *, partition: str | None = None, columns: str = SCHEMA) -> dict:
        engine = self.engine

        @dg.asset(name="t", partitions_def=PARTS if partition else None, metadata=meta)
        def t() -> object:
            return _frame(engine, rows, columns)

        result = dg.materialize([t], partition_key=partition, instance=self.instance, resources=self.resources)
        meta_out = result.get_asset_materialization_events()[0].materialization.metadata
        return {k: getattr(meta_out[k], "value", meta_out[k]) for k in STAT_KEYS if k in meta_out}

    def rows(self) -> list[dict]:
        return sorted(lance.dataset(f"{self.root}/t.lance").to_table().to_pylist(), key=lambda r: r["id"])

    def error(self, rows: list[tuple], meta: dict, *, partition: str | None = None, columns: str = SCHEMA,
              expected: type[Exception]) -> str:
        with pytest.raises(expected) as info:
            self.run(rows, meta, partition=partition, columns=columns)
        return str(info.value).replace(self.root, "<root>")


def _both(tmp_path, instance, steps) -> list:
    """Run ``steps(scenario)`` with each engine; the recorded outcomes must be equal."""
    outcomes = {}
    for engine in ("arrow", "spark"):
        outcomes[engine] = steps(Scenario(engine, str(tmp_path / engine), instance))
    assert outcomes["arrow"] == outcomes["spark"]
    return outcomes["arrow"]


PARTITIONED = {"partition_expr": "p"}
MERGE = {"lance/write_mode": "merge", "lance/merge_on": "id"}


def test_partition_overwrite_append_and_scoped_merge_agree(spark, tmp_path, instance):
    def steps(s: Scenario):
        out = [
            s.run([(1, "a", "x"), (2, "a", "y")], PARTITIONED, partition="a"),
            s.run([(3, "b", "z")], PARTITIONED, partition="b"),
            s.run([(4, "a", "w")], PARTITIONED, partition="a"),  # replaces partition a only
            s.rows(),
            s.run([(5, "b", "q")], {**PARTITIONED, "lance/write_mode": "append"}, partition="b"),
            # delete_not_matched_by_source scoped to partition "b": id 3 and 5 go unless in the source
            s.run([(3, "b", "Z")], {**PARTITIONED, **MERGE, "lance/merge_delete_not_matched_by_source": True},
                  partition="b"),
            s.rows(),
        ]
        return out

    out = _both(tmp_path, instance, steps)
    assert out[2]["lance/rows_deleted"] == 2 and out[2]["dagster/partition_row_count"] == 1
    assert out[3] == [{"id": 3, "p": "b", "v": "z"}, {"id": 4, "p": "a", "v": "w"}]
    assert out[5]["lance/rows_deleted"] == 1 and out[5]["lance/rows_updated"] == 1
    assert out[6] == [{"id": 3, "p": "b", "v": "Z"}, {"id": 4, "p": "a", "v": "w"}]


def test_whole_table_overwrite_merge_and_ignore_agree(spark, tmp_path, instance):
    def steps(s: Scenario):
        return [
            s.run([(1, "a", "x"), (2, "a", "y")], {}),
            s.run([(2, "b", "Y"), (3, "b", "z")], MERGE),
            s.run([(9, "a", "n")], {"lance/write_mode": "ignore"}),
            s.run([(7, "a", "o")], {}),
            s.rows(),
        ]

    out = _both(tmp_path, instance, steps)
    assert out[1]["lance/rows_updated"] == 1 and out[1]["lance/rows_inserted"] == 1
    assert out[2]["lance/skipped"] is True and out[2]["lance/version"] == 2
    assert out[3]["lance/rows_deleted"] == 3 and out[4] == [{"id": 7, "p": "a", "v": "o"}]


def test_refusals_have_the_same_messages(spark, tmp_path, instance):
    def steps(s: Scenario):
        s.run([(1, "a", "x")], PARTITIONED, partition="a")
        return [
            s.error([(2, "a", "y")], {**PARTITIONED, "lance/write_mode": "error"}, partition="a",
                    expected=DatasetAlreadyExistsError),
            s.error([(2, "a", "y", "new")], {**PARTITIONED, **MERGE, "lance/schema_mode": "add_columns"},
                    partition="a", columns=SCHEMA + ", extra string", expected=SchemaMismatchError),
            s.run([(2, "b", "y")], {**PARTITIONED, "lance/write_mode": "error"}, partition="b"),  # empty: written
            s.rows(),
        ]

    out = _both(tmp_path, instance, steps)
    assert "write_mode='error' but the partition(s) ['a'] already holds 1 row(s) (asset t)" in out[0]
    assert "write_mode='merge' cannot add columns ['extra']" in out[1]
    assert out[2]["dagster/partition_row_count"] == 1 and len(out[3]) == 2


def test_delete_by_source_is_scoped_once():
    by_source = MergeOptions(on=("id",), delete_not_matched_by_source=True)
    filtered = MergeOptions(on=("id",), delete_not_matched_by_source="v > 1")
    assert scoped_delete_by_source(by_source, None) is True
    assert scoped_delete_by_source(by_source, "p = 'a'") == "p = 'a'"
    assert scoped_delete_by_source(filtered, "p = 'a'") == "(p = 'a') AND (v > 1)"
    assert scoped_delete_by_source(MergeOptions(on=("id",)), "p = 'a'") is False
