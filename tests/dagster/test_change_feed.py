"""Change-feed inputs of version-partitioned assets, single-run backfills, and the CDC aggregate."""

from __future__ import annotations

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_assets import LanceChangeFeed, LanceIOManager, change_counts
from lance_format.errors import InvalidInputError

RANGE = {"dagster/asset_partition_range_start": "2", "dagster/asset_partition_range_end": "4"}


@pytest.fixture
def source(root):
    """orders: v1 insert 3 rows, v2 append 2, v3 update id=2, v4 delete id=1."""
    uri = f"{root}/orders.lance"
    ds = lance_format.write_dataset(pa.table({"id": [1, 2, 3], "amount": [10.0, 20.0, 30.0]}), uri,
                                    enable_stable_row_ids=True)
    lance_format.write_dataset(pa.table({"id": [4, 5], "amount": [40.0, 50.0]}), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.update({"amount": "amount + 1"}, where="id = 2")
    ds.delete("id = 1")
    assert lance_format.dataset(uri).version == 4
    return uri


VERSIONS = dg.DynamicPartitionsDefinition(name="orders_versions")


@dg.asset
def orders() -> pa.Table:  # the source; its table is written directly in these tests
    raise AssertionError("not materialized here")


def _run(assets, root, instance, **kwargs):
    return dg.materialize([orders, *assets], selection=assets, instance=instance,
                          resources={"io_manager": LanceIOManager(base_uri=root)}, **kwargs)


def _feed_asset(annotation, seen, **meta):
    def changes(context, orders) -> None:
        seen[context.partition_key if context.has_partition_key else "range"] = orders

    changes.__annotations__.update(orders=annotation, **{"return": None})  # this module's annotations are strings
    return dg.asset(partitions_def=VERSIONS, ins={"orders": dg.AssetIn(metadata={"lance/read": "changes", **meta})})(
        changes
    )


def test_single_version_feed_as_pyarrow(source, root, instance):
    instance.add_dynamic_partitions("orders_versions", ["1", "2", "3", "4"])
    seen = {}
    asset = _feed_asset(pa.Table, seen)
    for key in ["1", "2", "3", "4"]:
        _run([asset], root, instance, partition_key=key)
    assert change_counts(seen["1"]) == {"inserted": 3, "updated": 0, "deleted": 0}
    assert change_counts(seen["2"]) == {"inserted": 2, "updated": 0, "deleted": 0}
    update = seen["3"].to_pylist()
    assert [(r["_change_type"], r["id"], r["amount"]) for r in update] == [
        ("update_preimage", 2, 20.0), ("update_postimage", 2, 21.0)]
    (delete,) = seen["4"].to_pylist()
    assert (delete["_change_type"], delete["id"], delete["amount"], delete["_commit_version"]) == ("delete", 1, 10.0, 4)


def test_feed_as_pandas_reader_and_lazy_handle(source, root, instance):
    instance.add_dynamic_partitions("orders_versions", ["3"])
    seen = {}
    _run([_feed_asset(pd.DataFrame, seen, columns=["amount"])], root, instance, partition_key="3")
    frame = seen["3"]
    assert isinstance(frame, pd.DataFrame) and list(frame["amount"]) == [20.0, 21.0]
    assert "id" not in frame.columns and "_change_type" in frame.columns

    _run([_feed_asset(pa.RecordBatchReader, seen)], root, instance, partition_key="3")
    assert isinstance(seen["3"], pa.RecordBatchReader) and seen["3"].read_all().num_rows == 2

    @dg.asset(partitions_def=VERSIONS)
    def handle(context, orders: LanceChangeFeed) -> None:
        seen["handle"] = orders

    _run([handle], root, instance, partition_key="3")
    feed = seen["handle"]
    assert (feed.begin_version, feed.end_version, list(feed.versions)) == (2, 3, [3])
    assert feed.to_table().num_rows == 2


def test_single_run_backfill_reads_whole_range_at_once(source, root, instance, monkeypatch):
    import lance_assets.engine as engine

    instance.add_dynamic_partitions("orders_versions", ["1", "2", "3", "4"])
    calls = []
    original = engine.change_feed
    monkeypatch.setattr(engine, "change_feed", lambda uri, b, e, **k: calls.append((b, e)) or original(uri, b, e, **k))

    @dg.asset(partitions_def=VERSIONS, backfill_policy=dg.BackfillPolicy.single_run(),
              ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})},
              metadata={"lance/write_mode": "append"})
    def change_log(context, orders: pa.Table) -> pa.Table:
        return orders.select(["id", "_change_type", "_commit_version"])

    result = _run([change_log], root, instance, tags=RANGE)
    assert calls == [(1, 4)]  # one feed read for versions 2..4
    log = lance.dataset(f"{root}/change_log.lance")
    assert log.version == 1  # one commit for the whole range
    assert sorted(set(log.to_table().column("_commit_version").to_pylist())) == [2, 3, 4]
    meta = result.get_asset_materialization_events()
    assert {e.partition for e in meta} == {"2", "3", "4"}
    props = log.read_transaction(1).transaction_properties
    assert props["dagster/partition_key_range"] == "2...4"


def test_incremental_aggregate_from_the_feed(source, root, instance):
    """A CDC asset keeping per-customer totals up to date by merging deltas."""
    instance.add_dynamic_partitions("orders_versions", ["1", "2", "3", "4"])

    @dg.asset(partitions_def=VERSIONS, backfill_policy=dg.BackfillPolicy.single_run(),
              ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})},
              metadata={"lance/write_mode": "merge", "lance/merge_on": "bucket"})
    def totals(context, orders: pa.Table) -> pa.Table:
        sign = pc.if_else(pc.is_in(orders.column("_change_type"), pa.array(["delete", "update_preimage"])), -1.0, 1.0)
        deltas = pa.table({"bucket": pc.equal(pc.bit_wise_and(orders.column("id"), 1), 1),
                           "delta": pc.multiply(orders.column("amount"), sign)})
        grouped = deltas.group_by("bucket").aggregate([("delta", "sum")])
        current = {}
        uri = f"{root}/totals.lance"
        try:
            current = {r["bucket"]: r["total"] for r in lance_format.dataset(uri).to_table().to_pylist()}
        except lance_format.DatasetNotFoundError:
            pass
        return pa.table({"bucket": grouped.column("bucket"),
                         "total": [current.get(b, 0.0) + d for b, d in zip(grouped.column("bucket").to_pylist(),
                                                                         grouped.column("delta_sum").to_pylist())]})

    _run([totals], root, instance, partition_key="1")
    _run([totals], root, instance, tags=RANGE)
    result = {r["bucket"]: r["total"] for r in lance.dataset(f"{root}/totals.lance").to_table().to_pylist()}
    live = lance.dataset(f"{root}/orders.lance").to_table().to_pylist()
    expected = {True: sum(r["amount"] for r in live if r["id"] % 2), False: sum(r["amount"] for r in live if r["id"] % 2 == 0)}
    assert result == expected


def test_change_feed_needs_version_partitions(source, root, instance):
    @dg.asset(ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})})
    def unpartitioned(orders: pa.Table) -> None:
        pass

    with pytest.raises(InvalidInputError, match="no version partition"):
        _run([unpartitioned], root, instance)

    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")

    @dg.asset(partitions_def=daily, ins={"orders": dg.AssetIn(metadata={"lance/read": "changes"})})
    def by_day(orders: pa.Table) -> None:
        pass

    with pytest.raises(InvalidInputError, match="not Lance version numbers"):
        _run([by_day], root, instance, partition_key="2024-01-02")


def test_explicit_range_and_missing_versions(source, root, instance):
    seen = {}

    @dg.asset(ins={"orders": dg.AssetIn(metadata={"lance/read": "changes", "lance/begin_version": 0,
                                                  "lance/end_version": 4})})
    def everything(orders: pa.Table) -> None:
        seen["all"] = orders

    _run([everything], root, instance)
    assert change_counts(seen["all"]) == {"inserted": 5, "updated": 1, "deleted": 1}

    instance.add_dynamic_partitions("orders_versions", ["9"])
    with pytest.raises(lance_format.VersionNotFoundError):
        _run([_feed_asset(pa.Table, seen)], root, instance, partition_key="9")


def test_change_feed_without_stable_row_ids_fails_clearly(root, instance):
    lance_format.write_dataset(pa.table({"id": [1]}), f"{root}/orders.lance", enable_stable_row_ids=False)
    instance.add_dynamic_partitions("orders_versions", ["1"])
    with pytest.raises(InvalidInputError, match="stable row ids"):
        _run([_feed_asset(pa.Table, {})], root, instance, partition_key="1")
