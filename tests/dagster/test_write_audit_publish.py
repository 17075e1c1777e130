"""Write-audit-publish on Lance branches, through real Dagster runs on real tables.

A write-audit-publish asset is written to ``audit/<run id>``; its blocking checks (an input
loaded by the IO manager, ``load_audited`` and the lance check factories) see the branch;
``lance_publish_asset`` moves main to it in one commit once they pass; a failing check leaves
main as it was and the branch readable; downstream assets read main only; a main that moved
meanwhile is refused; maintenance removes old audit branches. pylance reads every result.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lance_assets import (
    LanceIOManager,
    LanceMaintenancePolicy,
    LanceTableResource,
    build_lance_maintenance_assets,
    lance_publish_asset,
    lance_row_count_check,
    lance_schema_change_check,
    load_audited,
)

try:  # an optional extra
    import polars as pl
except ImportError:  # pragma: no cover
    pl = None

WAP = {"lance/write_audit_publish": True}


def _scenario(state: dict, *, metadata: dict | None = None):
    """orders (write-audit-publish), three blocking checks, its publish asset and a downstream."""

    @dg.asset(metadata={**WAP, **(metadata or {})})
    def orders() -> pa.Table:
        return pa.table({"id": pa.array(state["ids"], pa.int64())})

    @dg.asset_check(asset=orders, blocking=True)
    def ids_positive(orders: pa.Table) -> dg.AssetCheckResult:
        state.setdefault("checked", []).append(orders["id"].to_pylist())
        return dg.AssetCheckResult(passed=pc.min(orders["id"]).as_py() > 0)

    @dg.asset_check(asset=orders, blocking=True, required_resource_keys={"io_manager"})
    def ids_unique(context) -> dg.AssetCheckResult:
        ids = load_audited(context, orders, columns=["id"])["id"]
        state.setdefault("loaded", []).append(ids.to_pylist())
        if state.get("concurrent_writer"):
            state.pop("concurrent_writer")(state["uri"])
        return dg.AssetCheckResult(passed=len(pc.unique(ids)) == len(ids))

    rows = lance_row_count_check(orders, min_rows=1, resource_key="io_manager", blocking=True)

    @dg.asset
    def order_count(orders: pa.Table) -> pa.Table:
        state.setdefault("downstream", []).append(sorted(orders["id"].to_pylist()))
        return pa.table({"n": [orders.num_rows]})

    return [orders, ids_positive, ids_unique, rows, lance_publish_asset(orders), order_count]


def _meta(result: dg.ExecuteInProcessResult, key: str) -> dict:
    events = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey.from_user_string(key)]
    assert len(events) == 1, key
    return {k: getattr(v, "value", v) for k, v in events[0].materialization.metadata.items()}


def _ids(uri: str, reference=None) -> list[int]:
    ds = lance.dataset(uri)
    if reference is not None:
        ds = ds.checkout_version(reference)
    return sorted(ds.to_table()["id"].to_pylist())


def test_passing_checks_publish_in_one_commit(root, instance):
    uri = f"{root}/orders.lance"
    state = {"ids": [1, 2, 3]}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    first = dg.materialize(_scenario(state), instance=instance, resources=resources)
    assert first.success
    # a new table: main is created empty (version 1), the branch holds the rows, publish is version 2
    assert lance.dataset(uri).version == 2 and _ids(uri) == [1, 2, 3]

    state["ids"] = [4, 5]
    result = dg.materialize(_scenario(state), instance=instance, resources=resources)
    assert result.success
    branch = f"audit/{result.run_id}"
    written, published = _meta(result, "orders"), _meta(result, "orders_published")
    assert written["lance/branch"] == branch and written["lance/published"] is False
    assert written["lance/branch_version"] == 3 and written["lance/main_version_before"] == 2
    assert written["dagster/uri"] == uri and written["dagster/row_count"] == 2
    assert published["lance/published"] is True and published["lance/main_version"] == 3
    assert published["lance/branch"] == branch and published["dagster/row_count"] == 2
    observed = [e for e in result.get_asset_observation_events() if e.asset_key == dg.AssetKey("orders")]
    assert [e.asset_observation_data.asset_observation.metadata["lance/main_version"].value for e in observed] == [3]

    main = lance.dataset(uri)
    assert main.version == 3 and _ids(uri) == [4, 5]  # exactly one new main version
    props = main.read_transaction(3).transaction_properties
    assert props["lance/published_branch"] == branch and props["dagster/run_id"] == result.run_id
    # every check saw the branch, the downstream saw the published rows
    assert state["checked"][-1] == [4, 5] and state["loaded"][-1] == [4, 5]
    assert state["downstream"][-1] == [4, 5]
    check = result.get_asset_check_evaluations()
    row_check = next(e for e in check if e.check_name == "lance_row_count_in_bounds")
    assert row_check.passed and row_check.metadata["lance/branch"].value == branch
    assert row_check.metadata["dagster/row_count"].value == 2
    assert _ids(uri, (branch, None)) == [4, 5]  # the branch stays until maintenance removes it


def test_failing_blocking_check_leaves_main_untouched(root, instance):
    uri = f"{root}/orders.lance"
    state = {"ids": [1, 2, 3]}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    dg.materialize(_scenario(state), instance=instance, resources=resources)
    before = lance.dataset(uri).version

    state["ids"] = [7, -1, 7]
    result = dg.materialize(_scenario(state), instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    skipped = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    started = {e.step_key for e in result.all_events if e.event_type_value == "STEP_START"}
    assert "orders_published" not in started and "order_count" not in started, skipped
    assert lance.dataset(uri).version == before and _ids(uri) == [1, 2, 3]
    branch = f"audit/{result.run_id}"
    assert _ids(uri, (branch, None)) == [-1, 7, 7]  # inspectable with pylance
    assert state["downstream"] == [[1, 2, 3]]

    # a later run that only reads orders sees main, never the failed branch's rows
    defs = _scenario(state)
    dg.materialize(defs, selection=["order_count"], instance=instance, resources=resources)
    assert state["downstream"][-1] == [1, 2, 3]


def test_downstream_in_the_same_run_publishes_first(root, instance):
    """Without the publish asset in the run, the downstream asset publishes before reading main."""
    uri = f"{root}/orders.lance"
    state = {"ids": [10, 11]}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    defs = _scenario(state)
    result = dg.materialize(defs, selection=["orders", "order_count"], instance=instance,
                            resources=resources)
    assert result.success
    assert state["downstream"] == [[10, 11]]
    assert lance.dataset(uri).version == 2 and _ids(uri) == [10, 11]
    assert lance.dataset(uri).read_transaction(2).transaction_properties["lance/published_branch"] == \
        f"audit/{result.run_id}"


def test_main_moved_between_branch_and_publish_is_refused(root, instance):
    uri = f"{root}/orders.lance"
    state = {"ids": [1, 2], "uri": uri}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    dg.materialize(_scenario(state), instance=instance, resources=resources)

    def concurrent_writer(table_uri: str) -> None:
        lance.write_dataset(pa.table({"id": pa.array([99], pa.int64())}), table_uri, mode="append")

    state.update(ids=[3, 4], concurrent_writer=concurrent_writer)
    result = dg.materialize(_scenario(state), instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert {e.step_key for e in failures} <= {"orders_published", "order_count"} and failures
    error = next(e for e in failures if e.step_key == "orders_published").event_specific_data.error
    message = error.to_string()
    assert "CommitConflictError" in message
    assert "main has moved to version 3" in message and "branch is kept" in message
    assert _ids(uri) == [1, 2, 99]  # main's concurrent commit is not lost
    assert lance.dataset(uri).version == 3
    assert _ids(uri, (f"audit/{result.run_id}", None)) == [3, 4]


def test_rebase_publishes_over_a_concurrent_append(root, instance):
    uri = f"{root}/orders.lance"
    state = {"ids": [1, 2], "uri": uri}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    dg.materialize(_scenario(state, metadata={"lance/write_mode": "append"}), instance=instance, resources=resources)

    def concurrent_writer(table_uri: str) -> None:
        lance.write_dataset(pa.table({"id": pa.array([99], pa.int64())}), table_uri, mode="append")

    state.update(ids=[3, 4], concurrent_writer=concurrent_writer)
    defs = _scenario(state, metadata={"lance/write_mode": "append", "lance/write_audit_publish_rebase": True})
    result = dg.materialize(defs, instance=instance, resources=resources)
    assert result.success
    assert _ids(uri) == [1, 2, 3, 4, 99] and lance.dataset(uri).version == 4  # main's commit kept, then ours
    assert _meta(result, "orders_published")["lance/main_version"] == 4
    assert state["checked"][-1] == [1, 2, 3, 4]  # what was audited: the branch, without the concurrent row


def test_io_manager_setting_pandas_merge_and_table_config(root, instance):
    uri = f"{root}/customers.lance"
    state = {"rows": pd.DataFrame({"id": [1, 2], "name": ["a", "b"]})}

    @dg.asset(metadata={"lance/write_mode": "merge", "lance/merge_on": "id",
                        "lance/table_config": {"wap.audited": "yes"}})
    def customers() -> pd.DataFrame:
        return state["rows"]

    @dg.asset_check(asset=customers, blocking=True)
    def names_present(customers: pd.DataFrame) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=bool(customers["name"].notna().all()))

    defs = [customers, names_present, lance_publish_asset(customers),
            lance_schema_change_check(customers, resource_key="io_manager", blocking=True)]
    resources = {"io_manager": LanceIOManager(base_uri=root, write_audit_publish=True)}
    assert dg.materialize(defs, instance=instance, resources=resources).success
    state["rows"] = pd.DataFrame({"id": [2, 3], "name": ["B", "c"]})
    result = dg.materialize(defs, instance=instance, resources=resources)
    assert result.success
    main = lance.dataset(uri)
    table = main.to_table().to_pandas().sort_values("id")
    assert table["name"].tolist() == ["a", "B", "c"]
    assert main.config()["wap.audited"] == "yes"
    published = _meta(result, "customers_published")
    assert published["lance/main_version"] == 3 and published["lance/version"] == main.version == 3
    assert type(main.read_transaction(3).operation).__name__ == "Update"  # the merge, replayed on main
    # the first run's branch held the rows and the table config: main got both in ONE commit
    first = lance.dataset(uri, version=2)
    assert first.config()["wap.audited"] == "yes" and first.count_rows() == 2
    assert lance.dataset(uri, version=1).count_rows() == 0 and "wap.audited" not in lance.dataset(uri, version=1).config()
    assert first.read_transaction(2).transaction_properties["lance/published_commits"] == "2"

    state["rows"] = pd.DataFrame({"id": [4], "name": [None]})
    failed = dg.materialize(defs, instance=instance, resources=resources, raise_on_error=False)
    assert not failed.success and lance.dataset(uri).count_rows() == 3 and lance.dataset(uri).version == 3


def test_maintenance_removes_old_audit_branches(root, instance):
    uri = f"{root}/orders.lance"
    state = {"ids": [1]}
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    defs = _scenario(state)
    for ids in ([1], [2], [-3], [4]):
        state["ids"] = ids
        dg.materialize(defs, instance=instance, resources=resources, raise_on_error=False)
    assert len(lance.dataset(uri).branches.list()) == 4
    policy = LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=timedelta(0), audit_branches_keep=1)
    maintenance = build_lance_maintenance_assets([defs[0]], policy=policy)
    result = dg.materialize([*maintenance, *defs], selection=maintenance, instance=instance, resources=resources)
    meta = _meta(result, "lance_maintenance/orders")
    assert meta["lance/maintenance/audit_branches_removed"] == 3
    assert meta["lance/maintenance/audit_branches_left"] == 1
    main = lance.dataset(uri)
    assert list(main.branches.list()) == [f"audit/{instance.get_runs(limit=2)[1].run_id}"]
    assert _ids(uri) == [4]  # main's published files were copied: the branches' removal keeps them

    by_age = LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=None,
                                    audit_branches_older_than=timedelta(days=1))
    again = build_lance_maintenance_assets([defs[0]], policy=by_age)
    result = dg.materialize([*again, *defs], selection=again, instance=instance, resources=resources)
    assert _meta(result, "lance_maintenance/orders")["lance/maintenance/audit_branches_removed"] == 0


def test_a_job_with_a_table_resource_check(root, instance):
    """A job run (not materialize); the check loads the branch through a LanceTableResource."""
    seen = {}

    @dg.asset(metadata=WAP)
    def plain() -> pa.Table:
        return pa.table({"id": pa.array([1, 2], pa.int64())})

    @dg.asset_check(asset=plain, blocking=True, required_resource_keys={"lance"})
    def two_rows(context) -> dg.AssetCheckResult:
        seen["rows"] = load_audited(context, plain, io_manager_key="lance").num_rows
        seen["main"] = lance.dataset(f"{root}/plain.lance").count_rows()
        return dg.AssetCheckResult(passed=seen["rows"] == 2)

    publish = lance_publish_asset(plain, key=dg.AssetKey(["published", "plain"]))
    job = dg.define_asset_job("wap_job", selection=[plain, publish])
    defs = dg.Definitions(assets=[plain, publish], asset_checks=[two_rows], jobs=[job],
                          resources={"io_manager": LanceIOManager(base_uri=root),
                                     "lance": LanceTableResource(base_uri=root)})
    result = defs.resolve_job_def("wap_job").execute_in_process(instance=instance)
    assert result.success
    assert seen == {"rows": 2, "main": 0}  # the check saw the branch while main was still empty
    assert lance.dataset(f"{root}/plain.lance").count_rows() == 2
    event = instance.get_latest_materialization_event(dg.AssetKey(["published", "plain"]))
    assert event.asset_materialization.metadata["lance/main_version"].value == 2


def test_wap_metadata_must_be_a_bool(root, instance):
    @dg.asset(metadata={"lance/write_audit_publish": "yes"})
    def odd() -> pa.Table:
        return pa.table({"id": [1]})

    with pytest.raises(Exception, match="lance/write_audit_publish must be true or false"):
        dg.materialize([odd], instance=instance, resources={"io_manager": LanceIOManager(base_uri=root)})



def test_partitioned_asset_publishes_each_partition(root, instance):
    uri = f"{root}/daily_sales.lance"
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
    seen: dict[str, list] = {}

    @dg.asset(partitions_def=daily, metadata={**WAP, "partition_expr": "day"})
    def daily_sales(context) -> pa.Table:
        day = context.partition_key
        bad = seen.get("bad") == day
        return pa.table({"day": [day, day], "amount": [-1.0 if bad else 1.0, 2.0]})

    @dg.asset_check(asset=daily_sales, blocking=True)
    def amounts_positive(context, daily_sales: pa.Table) -> dg.AssetCheckResult:
        seen.setdefault("audited", []).append(sorted(set(daily_sales["day"].to_pylist())))
        return dg.AssetCheckResult(passed=pc.min(daily_sales["amount"]).as_py() > 0)

    defs = [daily_sales, amounts_positive, lance_publish_asset(daily_sales)]
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    for day in ("2024-01-01", "2024-01-02", "2024-01-01"):
        assert dg.materialize(defs, partition_key=day, instance=instance, resources=resources).success
    main = lance.dataset(uri)
    assert main.count_rows() == 4 and main.version == 4  # empty main, then one publish per run
    assert type(main.read_transaction(4).operation).__name__ == "Update"  # the partition's replace-where
    seen["bad"] = "2024-01-02"
    failed = dg.materialize(defs, partition_key="2024-01-02", instance=instance, resources=resources,
                            raise_on_error=False)
    assert not failed.success and lance.dataset(uri).version == 4
    assert sorted(lance.dataset(uri).to_table(filter="day = '2024-01-02'")["amount"].to_pylist()) == [1.0, 2.0]


def test_polars_output_is_audited_and_published(root, instance):
    if pl is None:
        pytest.skip("polars is not installed (the optional extra 'polars')")

    @dg.asset(metadata=WAP)
    def frame() -> pl.DataFrame:
        return pl.DataFrame({"id": [1, 2, 3]})

    @dg.asset_check(asset=frame, blocking=True)
    def three_rows(frame: pl.DataFrame) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(passed=frame.height == 3)

    result = dg.materialize([frame, three_rows, lance_publish_asset(frame)], instance=instance,
                            resources={"io_manager": LanceIOManager(base_uri=root)})
    assert result.success and _ids(f"{root}/frame.lance") == [1, 2, 3]


def test_several_assets_of_one_table_publish_in_one_commit(root, instance):
    """Two assets (pyarrow and pandas) stored in one table, written in one run: both go to the
    run's one branch, each asset's checks see both, and main gets them in ONE commit."""
    uri = f"{root}/orders_all.lance"
    shared = {**WAP, "lance/uri": uri, "lance/write_mode": "append", "lance/table_config": {"source": "regions"},
              "lance/commit_properties": {"team": "orders"}}
    seen: dict[str, list] = {}

    @dg.asset(metadata=shared)
    def eu_orders() -> pa.Table:
        return pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["eu", "eu"]})

    @dg.asset(metadata=shared)
    def us_orders() -> pd.DataFrame:
        return pd.DataFrame({"id": pd.array([3], dtype="int64"), "region": ["us"]})

    def region_check(asset, region):
        @dg.asset_check(asset=asset, blocking=True, name=f"{region}_rows", required_resource_keys={"io_manager"})
        def _check(context) -> dg.AssetCheckResult:
            audited = load_audited(context, asset)  # the run's branch: both assets' rows
            seen.setdefault(region, []).append(sorted(audited["id"].to_pylist()))
            ids = audited.filter(pc.equal(audited["region"], region))["id"]
            return dg.AssetCheckResult(passed=len(ids) > 0 and pc.min(ids).as_py() > 0)
        return _check

    defs = [eu_orders, us_orders, region_check(eu_orders, "eu"), region_check(us_orders, "us"),
            lance_publish_asset(eu_orders), lance_publish_asset(us_orders)]
    resources = {"io_manager": LanceIOManager(base_uri=root)}
    result = dg.materialize(defs, instance=instance, resources=resources)
    assert result.success
    branch = f"audit/{result.run_id}"
    main = lance.dataset(uri)
    assert main.version == 2  # main created empty, then ONE publish of everything the run wrote
    props = main.read_transaction(2).transaction_properties
    assert props["lance/published_commits"] == "3"  # 2 appends + config
    assert props["team"] == "orders" and props["dagster/run_id"] == result.run_id  # the writes' commit properties
    table = main.to_table(columns=["id", "region", "_row_created_at_version", "_row_last_updated_at_version"])
    assert sorted(table["id"].to_pylist()) == [1, 2, 3]
    assert set(table["_row_created_at_version"].to_pylist()) == {2} == set(table["_row_last_updated_at_version"]
                                                                         .to_pylist())
    assert main.config()["source"] == "regions"
    assert seen == {"eu": [[1, 2, 3]], "us": [[1, 2, 3]]}  # each check audited the whole branch
    publishes = [_meta(result, k) for k in ("eu_orders_published", "us_orders_published")]
    # one publish brought everything; the other found it done (or, run first, waited for the other's checks)
    assert all(m.get("lance/main_version") == 2 or "lance/waiting_for_checks" in m for m in publishes)
    assert _ids(uri, (branch, None)) == [1, 2, 3]

    # the next run: a failing check of one asset keeps BOTH out of main (they share the branch)
    @dg.asset(metadata=shared, name="eu_orders")
    def bad_eu() -> pa.Table:
        return pa.table({"id": pa.array([-1], pa.int64()), "region": ["eu"]})

    failed = dg.materialize([bad_eu, *defs[1:]], instance=instance, resources=resources, raise_on_error=False)
    assert not failed.success  # eu_rows failed: eu_orders_published is skipped
    held = _meta(failed, "us_orders_published")  # us_rows passed, but the branch holds eu's write too
    assert held["lance/published"] is False and held["lance/waiting_for_checks"] == "eu_orders:eu_rows"
    assert lance.dataset(uri).version == 2 and _ids(uri) == [1, 2, 3]
    assert _ids(uri, (f"audit/{failed.run_id}", None)) == [-1, 1, 2, 3, 3]  # kept for inspection


def test_single_run_backfill_publishes_its_partitions_in_one_commit(root, instance):
    uri = f"{root}/daily_totals.lance"
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
    bad = False

    @dg.asset(partitions_def=daily, backfill_policy=dg.BackfillPolicy.single_run(),
              metadata={**WAP, "partition_expr": "day", "lance/table_config": {"backfilled": "true"}})
    def daily_totals(context) -> pd.DataFrame:
        days = context.partition_keys
        return pd.DataFrame({"day": days, "total": [-1.0 if bad else float(i) for i in range(len(days))]})

    @dg.asset_check(asset=daily_totals, blocking=True)
    def totals_present(daily_totals: pd.DataFrame) -> dg.AssetCheckResult:  # (the whole audited table)
        return dg.AssetCheckResult(passed=len(daily_totals) == 3 and bool((daily_totals["total"] >= 0).all()))

    defs = dg.Definitions(assets=[daily_totals, lance_publish_asset(daily_totals)], asset_checks=[totals_present],
                          resources={"io_manager": LanceIOManager(base_uri=root)})
    tags = {"dagster/asset_partition_range_start": "2024-01-01", "dagster/asset_partition_range_end": "2024-01-03"}
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, tags=tags)
    assert result.success
    main = lance.dataset(uri)
    assert main.version == 2 and main.config()["backfilled"] == "true"
    assert sorted(main.to_table()["day"].to_pylist()) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert main.read_transaction(2).transaction_properties["lance/published_commits"] == "2"  # rows + config
    # a backfill of two of the days with a bad total fails its check: nothing is published
    tags["dagster/asset_partition_range_end"] = "2024-01-02"
    bad = True
    again = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, tags=tags,
                                                                            raise_on_error=False)
    assert not again.success and lance.dataset(uri).version == 2
    assert sorted(lance.dataset(uri).to_table()["total"].to_pylist()) == [0.0, 1.0, 2.0]
