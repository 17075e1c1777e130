"""Run the example pipeline end to end, headless, on local defaults.

1. Materialize ``raw_orders`` with Spark, then every daily partition of ``daily_orders`` and
   ``daily_revenue`` (and their checks), then ``product_embeddings`` (its IVF_PQ and INVERTED
   indices, built by the IO manager, and their checks) and ``similar_products``, which searches it.
2. Tick the version sensor: it adds version partitions and requests ``customer_totals`` runs;
   run them as the daemon would.
3. Run the ``change_raw_orders`` job: it changes the source table outside the asset (an upsert
   and a cancellation: two new versions) and logs the commits to an op-output table.
4. Tick the sensor again and run the change-feed runs it requests.
5. Run the maintenance job; print the aggregate, the versions, whether the incremental result
   equals a full recompute, and the command that serves all of it in the Dagster UI.

Run: ``python -m example_project.run_example [TABLE_DIR]``. The default directory is the one
``dg dev`` serves (``$LANCE_EXAMPLE_ROOT``, else ``<tmp>/lance-assets-example``), emptied first if
an earlier run made it. The run history goes to a Dagster instance in ``TABLE_DIR/dagster_home``:
with ``DAGSTER_HOME`` set to it, the UI shows these runs, materializations and check results.

With ``LANCE_EXAMPLE_NAMESPACE=dir`` the IO manager keeps the tables in a Lance Namespace (a V2
directory namespace rooted at ``TABLE_DIR``): asset ``raw_orders`` is table ``raw_orders``, the op
output is table ``ops.source_changes``, and the run ends by listing the catalog.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import dagster as dg

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
MARKER = ".lance-assets-example"  # marks a directory this example made (and may empty again)


def prepare_root(root: str | None) -> str:
    """The tables' directory: ``root``, or the default one ``dg dev`` serves, emptied first when
    an earlier run of the example made it (so every run starts from scratch)."""
    from example_project.source import example_root

    if root is None:
        root = example_root()
        if os.path.isdir(root) and os.listdir(root):
            if not os.path.exists(os.path.join(root, MARKER)):
                raise SystemExit(f"{root} exists and was not made by this example: remove it, or pass a directory")
            shutil.rmtree(root)
    os.makedirs(root, exist_ok=True)
    open(os.path.join(root, MARKER), "w").close()
    return root


def dagster_home(root: str) -> str:
    """The Dagster instance directory of a run of the example (``DAGSTER_HOME`` for ``dg dev``)."""
    return os.path.join(root, "dagster_home")


def main(root: str | None = None, instance: dg.DagsterInstance | None = None) -> int:
    import dagster as dg

    from example_project.source import example_root

    served = example_root()  # what `dg dev` serves without LANCE_EXAMPLE_ROOT
    root = prepare_root(root)
    serve = f"{'' if root == served else f'LANCE_EXAMPLE_ROOT={root} '}DAGSTER_HOME={dagster_home(root)} .venv/bin/dg dev"
    if os.environ.get("LANCE_EXAMPLE_NAMESPACE"):
        serve = f"LANCE_EXAMPLE_NAMESPACE={os.environ['LANCE_EXAMPLE_NAMESPACE']} {serve}"
    if instance is None:
        os.makedirs(dagster_home(root), exist_ok=True)
        config = os.path.join(dagster_home(root), "dagster.yaml")
        if not os.path.exists(config):
            open(config, "w").close()  # Dagster's defaults; without the file every start warns
        with dg.DagsterInstance.from_config(dagster_home(root)) as persistent:
            return _run(root, persistent, serve)
    return _run(root, instance, serve)


def _run(root: str, instance: dg.DagsterInstance, serve: str) -> int:
    import dagster as dg
    import pyarrow.compute as pc

    import lance_format
    from example_project.assets import ASSETS, DAILY, SEARCH_ASSETS, customer_totals
    from example_project.definitions import build_definitions
    from example_project.products import FULL_TEXT_QUERY, QUERY_PRODUCTS
    from example_project.source import example_namespace, expected_totals, orders_uri, table_location

    defs = build_definitions(root)
    resources = defs.resources
    sensor = defs.resolve_sensor_def("raw_orders_versions_sensor")
    everything = [*(defs.assets or []), *(defs.asset_checks or [])]  # as defs/lake/defs.yaml builds them

    def run(selection, **kwargs) -> dg.ExecuteInJobResult:
        return dg.materialize(everything, selection=selection, resources=resources, instance=instance,
                              raise_on_error=True, run_config=QUIET, **kwargs)

    print(f"tables under {root}")
    result = run([ASSETS[0]])
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    print(f"raw_orders written by Spark: version {lance_format.dataset(orders_uri(root)).version}, checks {checks}")
    for day in DAILY.get_partition_keys():
        run(ASSETS[1:3], partition_key=day)
    revenue = lance_format.dataset(os.path.join(root, "daily_revenue.lance")).to_table()
    print(f"daily partitions {DAILY.get_partition_keys()} -> daily_revenue has {revenue.num_rows} rows")

    cursor = None

    def tick_and_run() -> None:
        nonlocal cursor
        tick = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        if isinstance(tick, dg.SkipReason):
            print(f"sensor: {tick.skip_message}")
            return
        cursor = tick.cursor
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for request in tick.run_requests:
            outcome = run([customer_totals], partition_key=request.partition_key, tags=request.tags)
            meta = outcome.get_asset_materialization_events()[0].materialization.metadata
            counts = {k.split("/")[1]: meta[k].value for k in ("cdc/inserted", "cdc/updated", "cdc/deleted")
                      if k in meta}
            print(f"  customer_totals partition {request.partition_key}: changes {counts}")

    searched = run(list(SEARCH_ASSETS))
    meta = searched.asset_materializations_for_node("product_embeddings")[0].metadata
    built = [f"{e['name']} {e['type']} {e['action']} over {e['indexed_rows']} rows ({e['unindexed_rows']} unindexed)"
             for e in meta["lance/indices"].value]
    print(f"product_embeddings indices: {', '.join(built)}")
    checks = {e.check_name: e.passed for e in searched.get_asset_check_evaluations()
              if e.asset_key.path == ["product_embeddings"]}
    print(f"product_embeddings checks {checks}")
    similar = lance_format.dataset(os.path.join(root, "similar_products.lance")).to_table()
    first = similar.filter(pc.equal(similar.column("query_id"), QUERY_PRODUCTS[0])).column("name").to_pylist()
    text = similar.filter(pc.equal(similar.column("kind"), "full_text")).column("name").to_pylist()
    print(f"similar_products: {similar.num_rows} rows; nearest to {first[0]!r}: {first[1:3]}; "
          f"full text {FULL_TEXT_QUERY!r}: {text[:2]}")
    print("sensor tick 1 (the initial load):")
    tick_and_run()
    job = defs.resolve_job_def("change_raw_orders")
    job.execute_in_process(instance=instance, run_config=QUIET, raise_on_error=True)
    log = lance_format.dataset(table_location(root, ["ops", "source_changes"])).to_table()
    print(f"change_raw_orders job changed the source outside its asset: new raw_orders versions "
          f"{log.column('version').to_pylist()}")
    print("sensor tick 2 (the change feed):")
    tick_and_run()
    tick_and_run()  # nothing new: the cursor has moved past every version

    totals = lance_format.dataset(os.path.join(root, "customer_totals.lance"))
    rows = sorted(totals.to_table().to_pylist(), key=lambda r: r["customer"])
    print("customer_totals:")
    for row in rows:
        print(f"  {row['customer']:<4} total={row['total']:>7.2f} orders={row['orders']} as_of_version={row['as_of_version']}")
    print(f"raw_orders versions: {[v['version'] for v in lance_format.dataset(orders_uri(root)).versions()]}")
    print(f"customer_totals versions: {[v['version'] for v in totals.versions()]}")
    defs.resolve_job_def("lance_maintenance").execute_in_process(instance=instance, run_config=QUIET,
                                                                 raise_on_error=True)
    for key in ("raw_orders", "customer_totals", "product_embeddings"):
        event = instance.get_latest_materialization_event(dg.AssetKey(["lance_maintenance", key]))
        assert event is not None and event.asset_materialization is not None
        meta = {k.rsplit("/", 1)[1]: v.value for k, v in event.asset_materialization.metadata.items()
                if k.startswith("lance/maintenance/")}
        indexed = (f", unindexed rows {meta['unindexed_rows_before']} -> {meta['unindexed_rows_after']}"
                   if "unindexed_rows_after" in meta else "")
        print(f"lance_maintenance job: {key} fragments {meta['fragments_before']} -> {meta['fragments_after']}, "
              f"versions kept from {meta.get('keep_versions_from', '-')}{indexed}")
    incremental = {r["customer"]: (r["total"], r["orders"]) for r in rows if r["orders"]}
    consistent = incremental == expected_totals(orders_uri(root))
    print(f"incremental result equals a full recompute: {consistent}")
    if example_namespace(root) is not None:
        from lance_format.namespace import DirectoryNamespace, ListTablesRequest

        catalog = DirectoryNamespace(root=root)
        print(f"Lance Namespace at {root}: tables {catalog.list_tables(ListTablesRequest(id=[])).tables}, "
              f"ops tables {catalog.list_tables(ListTablesRequest(id=['ops'])).tables}")
    print(f"serve these tables and this run history in the Dagster UI (from the repository root):\n  {serve}")
    return 0 if consistent else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
