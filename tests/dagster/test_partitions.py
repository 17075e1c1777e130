"""Partitioned assets: static, time-window (tz-aware, naive, date, string), multi and dynamic."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager, partition_predicate
from lance_format.errors import InvalidInputError

UTC = dt.UTC


def _run(assets, root, instance, **kwargs):
    return dg.materialize(assets, resources={"io_manager": LanceIOManager(base_uri=root)}, instance=instance,
                          **kwargs)


def _versions(uri):
    return [v["version"] for v in lance.dataset(uri).versions()]


def _ops(uri):
    ds = lance.dataset(uri)
    return [type(ds.read_transaction(v).operation).__name__ for v in _versions(uri)]


DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")


def _daily_asset(make_column):
    @dg.asset(name="events", partitions_def=DAILY, metadata={"partition_expr": "ts"})
    def events(context) -> pa.Table:
        day = dt.datetime.fromisoformat(context.partition_key)
        # Intra-day values: range semantics must keep them in their day.
        stamps = [day + dt.timedelta(hours=h, minutes=30) for h in (0, 12, 23)]
        return pa.table({"ts": make_column(stamps), "v": [context.partition_key] * 3})

    return events


@pytest.mark.parametrize(
    "make_column",
    [
        pytest.param(lambda s: pa.array(s, pa.timestamp("us")), id="naive-us"),
        pytest.param(lambda s: pa.array(pd.Series(s).values, pa.timestamp("ns")), id="naive-ns-pandas"),
        pytest.param(lambda s: pa.array([x.replace(tzinfo=UTC) for x in s], pa.timestamp("us", tz="UTC")), id="tz-utc"),
        pytest.param(lambda s: pa.array([x.replace(tzinfo=UTC) for x in s], pa.timestamp("ms", tz="Europe/Paris")),
                     id="tz-paris"),
        pytest.param(lambda s: pa.array([x.date() for x in s], pa.date32()), id="date"),
        pytest.param(lambda s: pa.array([x.strftime("%Y-%m-%d") for x in s]), id="string"),
    ],
)
def test_time_window_rematerialization_replaces_only_that_day(root, instance, make_column):
    events = _daily_asset(make_column)
    for key in ["2024-01-01", "2024-01-02", "2024-01-01"]:
        _run([events], root, instance, partition_key=key)
    uri = f"{root}/events.lance"
    table = lance.dataset(uri).to_table()
    # dagster-deltalake leaves 3 rows here for naive timestamps (whole-table overwrite).
    assert table.num_rows == 6
    assert sorted(table.column("v").to_pylist()) == ["2024-01-01"] * 3 + ["2024-01-02"] * 3
    # One commit per materialization; the re-materialization is a single Update.
    assert _versions(uri) == [1, 2, 3]
    assert _ops(uri)[-1] == "Update"


def test_time_window_in_non_utc_timezone_with_naive_and_aware_columns(root, instance):
    ny = dg.DailyPartitionsDefinition(start_date="2024-03-09", timezone="America/New_York")

    @dg.asset(partitions_def=ny, metadata={"partition_expr": "local"})
    def local_events(context) -> pa.Table:
        window = context.partition_time_window
        local = [window.start.replace(tzinfo=None) + dt.timedelta(hours=h) for h in (0, 23)]
        return pa.table({"local": pa.array(local, pa.timestamp("us")), "k": [context.partition_key] * 2})

    for key in ["2024-03-09", "2024-03-10", "2024-03-09"]:  # 03-10 is a 23-hour DST day
        _run([local_events], root, instance, partition_key=key)
    assert lance.dataset(f"{root}/local_events.lance").count_rows() == 4

    window = ny.time_window_for_partition_key("2024-03-10")
    aware = pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC"))])
    naive = pa.schema([pa.field("ts", pa.timestamp("us"))])
    assert partition_predicate(ny, ["2024-03-10"], "ts", aware) == (
        "`ts` >= TIMESTAMP '2024-03-10 05:00:00.000000' AND `ts` < TIMESTAMP '2024-03-11 04:00:00.000000'"
    )
    paris = pa.schema([pa.field("ts", pa.timestamp("us", tz="Europe/Paris"))])
    assert partition_predicate(ny, ["2024-03-10"], "ts", paris) == (
        "`ts` >= TIMESTAMP '2024-03-10 06:00:00.000000' AND `ts` < TIMESTAMP '2024-03-11 05:00:00.000000'"
    )
    assert partition_predicate(ny, ["2024-03-10"], "ts", naive) == (
        "`ts` >= TIMESTAMP '2024-03-10 00:00:00.000000' AND `ts` < TIMESTAMP '2024-03-11 00:00:00.000000'"
    )
    assert window.end.timestamp() - window.start.timestamp() == 23 * 3600


def test_hourly_partitions_on_date_column_are_refused(root, instance):
    hourly = dg.HourlyPartitionsDefinition(start_date="2024-01-01-00:00")

    @dg.asset(partitions_def=hourly, metadata={"partition_expr": "d"})
    def by_hour(context) -> pa.Table:
        return pa.table({"d": [dt.date(2024, 1, 1)]})

    with pytest.raises(InvalidInputError, match="not whole days"):
        _run([by_hour], root, instance, partition_key="2024-01-01-05:00")


def test_rows_outside_the_partition_are_refused_and_table_unchanged(root, instance):
    @dg.asset(name="events", partitions_def=DAILY, metadata={"partition_expr": "ts"})
    def sloppy(context) -> pa.Table:
        return pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 5), dt.datetime(2024, 1, 2, 5)])})

    @dg.asset(name="events", partitions_def=DAILY, metadata={"partition_expr": "ts"})
    def clean(context) -> pa.Table:
        return pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 5)])})

    _run([clean], root, instance, partition_key="2024-01-01")
    with pytest.raises(InvalidInputError, match="1 new row"):
        _run([sloppy], root, instance, partition_key="2024-01-01")
    uri = f"{root}/events.lance"
    assert _versions(uri) == [1] and lance.dataset(uri).count_rows() == 1
    import os

    assert len(os.listdir(f"{uri}/data")) == 1  # the refused write's data file was removed


def test_partitioned_overwrite_without_partition_expr_is_refused(root, instance):
    @dg.asset(partitions_def=DAILY)
    def unscoped(context) -> pa.Table:
        return pa.table({"v": [1]})

    with pytest.raises(InvalidInputError, match="partition_expr"):
        _run([unscoped], root, instance, partition_key="2024-01-01")


def test_static_and_dynamic_partitions_and_loading_ranges(root, instance):
    static = dg.StaticPartitionsDefinition(["eu", "us", "apac"])
    dynamic = dg.DynamicPartitionsDefinition(name="tenants")
    instance.add_dynamic_partitions("tenants", ["1", "2"])

    @dg.asset(partitions_def=static, metadata={"partition_expr": "region"})
    def regional(context) -> pa.Table:
        return pa.table({"region": [context.partition_key] * 2, "n": [1, 2]})

    @dg.asset(partitions_def=dynamic, metadata={"partition_expr": "tenant"})
    def tenants(context) -> pa.Table:
        # An integer column holds the (string) dynamic partition key.
        return pa.table({"tenant": pa.array([int(context.partition_key)], pa.int32())})

    for key in ["eu", "us", "apac", "us"]:
        _run([regional], root, instance, partition_key=key)
    for key in ["1", "2", "1"]:
        _run([tenants], root, instance, partition_key=key)
    assert lance.dataset(f"{root}/regional.lance").count_rows() == 6
    assert sorted(lance.dataset(f"{root}/tenants.lance").to_table().column("tenant").to_pylist()) == [1, 2]

    seen = {}

    @dg.asset(partitions_def=static, ins={"regional": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
    def all_regions(context, regional: pa.Table) -> None:
        seen["all"] = regional

    @dg.asset(partitions_def=static)
    def same_region(context, regional: pd.DataFrame) -> None:
        seen["one"] = regional

    _run([regional, all_regions, same_region], root, instance, selection=[all_regions, same_region],
         partition_key="us")
    assert seen["all"].num_rows == 6
    assert set(seen["one"]["region"]) == {"us"} and len(seen["one"]) == 2


def test_time_window_range_loads_into_one_frame(root, instance):
    events = _daily_asset(lambda s: pa.array(s, pa.timestamp("us")))
    for key in ["2024-01-06", "2024-01-07", "2024-01-08", "2024-01-09"]:
        _run([events], root, instance, partition_key=key)
    weekly = dg.WeeklyPartitionsDefinition(start_date="2024-01-07")
    seen = {}

    @dg.asset(partitions_def=weekly)
    def week(context, events: pa.Table) -> None:
        seen["rows"] = sorted(set(events.column("v").to_pylist()))

    _run([events, week], root, instance, selection=[week], partition_key="2024-01-07")
    assert seen["rows"] == ["2024-01-07", "2024-01-08", "2024-01-09"]


def test_multi_partitions(root, instance):
    multi = dg.MultiPartitionsDefinition(
        {"date": dg.DailyPartitionsDefinition(start_date="2024-01-01"), "region": dg.StaticPartitionsDefinition(["eu", "us"])}
    )

    @dg.asset(partitions_def=multi, metadata={"partition_expr": {"date": "day", "region": "region"}})
    def sales(context) -> pa.Table:
        key = context.partition_key.keys_by_dimension
        return pa.table({"day": pa.array([dt.date.fromisoformat(key["date"])] * 2), "region": [key["region"]] * 2,
                         "n": [1, 2]})

    keys = [dg.MultiPartitionKey({"date": d, "region": r}) for d in ("2024-01-01", "2024-01-02") for r in ("eu", "us")]
    for key in keys + keys[:2]:
        _run([sales], root, instance, partition_key=key)
    table = lance.dataset(f"{root}/sales.lance").to_table()
    assert table.num_rows == 8
    seen = {}

    @dg.asset(partitions_def=multi)
    def downstream(context, sales: pa.Table) -> None:
        seen["rows"] = sales.to_pylist()

    _run([sales, downstream], root, instance, selection=[downstream], partition_key=keys[3])
    assert {(r["day"].isoformat(), r["region"]) for r in seen["rows"]} == {("2024-01-02", "us")}

    pred = partition_predicate(multi, keys, {"date": "day", "region": "region"}, table.schema)
    assert pred == ("(`day` >= DATE '2024-01-01' AND `day` < DATE '2024-01-03') AND (`region` IN ('eu', 'us'))")
    sparse = partition_predicate(multi, [keys[0], keys[3]], {"date": "day", "region": "region"}, table.schema)
    assert " OR " in sparse


def test_multi_partitions_need_dict_partition_expr():
    multi = dg.MultiPartitionsDefinition(
        {"a": dg.StaticPartitionsDefinition(["x"]), "b": dg.StaticPartitionsDefinition(["y"])}
    )
    schema = pa.schema([("a", pa.string()), ("b", pa.string())])
    with pytest.raises(InvalidInputError, match="dict"):
        partition_predicate(multi, ["x|y"], "a", schema)
    with pytest.raises(InvalidInputError, match=r"dimension\(s\) \['b'\]"):
        partition_predicate(multi, ["x|y"], {"a": "a"}, schema)


def test_predicate_literals_and_errors():
    static = dg.StaticPartitionsDefinition(["o'brien", "x"])
    schema = pa.schema([("s", pa.string()), ("i", pa.int64()), ("f", pa.float64()), ("d", pa.date32())])
    assert partition_predicate(static, ["o'brien"], "s", schema) == "`s` = 'o''brien'"
    with pytest.raises(InvalidInputError, match="not an integer"):
        partition_predicate(static, ["x"], "i", schema)
    with pytest.raises(InvalidInputError, match="is double"):
        partition_predicate(static, ["x"], "f", schema)
    with pytest.raises(InvalidInputError, match="neither one of the columns"):
        partition_predicate(static, ["x"], "missing", schema)
    assert partition_predicate(static, ["2024-01-05"], "d", schema) == "`d` = DATE '2024-01-05'"


def test_predicates_select_the_same_rows_in_pylance(tmp_path):
    """The rendered predicates mean the same to official Lance as to this engine."""
    import lance_format

    base = dt.datetime(2024, 3, 9, 22, 0, tzinfo=UTC)
    stamps = [base + dt.timedelta(minutes=37 * i) for i in range(200)]
    table = pa.table({
        "utc": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        "paris": pa.array(stamps, pa.timestamp("ms", tz="Europe/Paris")),
        "naive": pa.array([s.replace(tzinfo=None) for s in stamps], pa.timestamp("us")),
        "day": pa.array([s.date() for s in stamps], pa.date32()),
    })
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(table, uri)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for partitions in (dg.DailyPartitionsDefinition(start_date="2024-03-01", timezone="America/New_York"),
                       dg.HourlyPartitionsDefinition(start_date="2024-03-09-00:00")):
        keys = partitions.get_partition_keys(current_time=dt.datetime(2024, 3, 14, tzinfo=UTC))[-3:]
        for column in ("utc", "paris", "naive", "day"):
            if column == "day" and isinstance(partitions, dg.HourlyPartitionsDefinition):
                continue
            predicate = partition_predicate(partitions, keys[:2], column, table.schema)
            expected = theirs.to_table(filter=predicate).num_rows
            assert ours.count_rows(predicate) == expected, predicate


def test_partition_expr_as_sql_expression(root, instance):
    """``partition_expr`` given as SQL over columns (dagster-duckdb style): intra-day timestamps
    partitioned by ``CAST(ts AS DATE)``; a re-materialized day replaces exactly that day's rows,
    and a downstream partition loads exactly its day."""
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
    loaded = {}

    @dg.asset(partitions_def=daily, metadata={"partition_expr": "CAST(ts AS DATE)"})
    def events(context) -> pa.Table:
        day = dt.datetime.fromisoformat(context.partition_key)
        stamps = [day + dt.timedelta(hours=h) for h in (1, 13, 23)]
        return pa.table({"ts": pa.array(stamps, pa.timestamp("us")), "v": [1, 2, 3]})

    @dg.asset(partitions_def=daily)
    def per_day(context, events: pa.Table) -> None:
        loaded[context.partition_key] = sorted({t.date().isoformat() for t in events.column("ts").to_pylist()})

    for key in daily.get_partition_keys():
        _run([events], root, instance, partition_key=key)
    result = _run([events], root, instance, partition_key="2024-01-02")
    uri = f"{root}/events.lance"
    assert lance.dataset(uri).count_rows() == 9  # replaced, not added
    assert _ops(uri)[-1] == "Update"  # the day's rows replaced in one commit
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["dagster/partition_row_count"].value == 3
    _run([events, per_day], root, instance, partition_key="2024-01-03", selection=[per_day])
    assert loaded == {"2024-01-03": ["2024-01-03"]}


def test_sql_partition_expr_predicates():
    schema = pa.schema([("ts", pa.timestamp("us")), ("region", pa.string())])
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
    assert partition_predicate(daily, ["2024-01-02"], "CAST(ts AS DATE)", schema) == (
        "(CAST(ts AS DATE)) >= DATE '2024-01-02' AND (CAST(ts AS DATE)) < DATE '2024-01-03'")
    static = dg.StaticPartitionsDefinition(["eu", "us"])
    assert partition_predicate(static, ["eu"], "lower(region)", schema) == "(lower(region)) = 'eu'"
    with pytest.raises(InvalidInputError, match="neither one of the columns"):
        partition_predicate(static, ["eu"], "lower(nope)", schema)
    with pytest.raises(InvalidInputError, match="neither one of the columns"):
        partition_predicate(static, ["eu"], "CAST(ts AS", schema)
