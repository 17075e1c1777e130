"""End to end under ``dg dev`` (the README's way to serve the example): the served definitions,
then the sensor on via GraphQL, the example's op job changes the source, change-feed runs follow.

``dg dev`` runs from the repository root, the dg project directory (see ``dev_server``). The raw
table is seeded with pyarrow (no JVM needed); the ``change_raw_orders`` job (launched through
GraphQL, run by dg dev's run worker) makes two Lance commits, and the test waits for the
sensor-driven runs of those versions' partitions and checks their change counts.
"""

from __future__ import annotations

import lance_format
from example_project.source import expected_totals, orders_table
from tests.dagster.dev_server import LOCATION, GraphQL, dagster_home, dg_dev

SENSOR = "raw_orders_versions_sensor"

SERVED = """
query($location: String!) {
  repositoryOrError(repositorySelector: {repositoryLocationName: $location, repositoryName: "__repository__"}) {
    ... on Repository {
      assetNodes { assetKey { path } hasAssetChecks assetChecksOrError { ... on AssetChecks { checks { name } } } }
      jobs { name }
      sensors { name sensorState { status } }
    }
  }
}"""


MATERIALIZATIONS = """
query {
  assetNodes(assetKeys: [{path: ["customer_totals"]}]) {
    assetMaterializations(limit: 20) {
      partition
      metadataEntries { label ... on IntMetadataEntry { intValue } }
    }
  }
}"""


LAUNCH = """
mutation($p: ExecutionParams!) {
  launchRun(executionParams: $p) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""

RUN_STATUS = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


def _partition_counts(gql: GraphQL) -> dict[str, dict[str, int]]:
    (node,) = gql(MATERIALIZATIONS)["assetNodes"]
    result = {}
    for event in node["assetMaterializations"]:
        counts = {e["label"].split("/")[1]: e["intValue"] for e in event["metadataEntries"]
                  if e["label"].startswith("cdc/") and "intValue" in e}
        result.setdefault(event["partition"], counts)
    return result


def test_dg_dev_serves_the_component_definitions(tmp_path):
    """What ``dg dev`` serves is what defs/lake/defs.yaml configures: the assets (with the
    maintenance assets), their checks, the op job and the maintenance job, the version sensor."""
    with dg_dev(dagster_home(tmp_path / "home"), tmp_path / "lake", tmp_path / "dg_dev.log") as server:
        repo = server.gql(SERVED, {"location": LOCATION})["repositoryOrError"]
    assets = {"/".join(n["assetKey"]["path"]): sorted(c["name"] for c in n["assetChecksOrError"]["checks"])
              for n in repo["assetNodes"]}
    assert assets == {
        "raw_orders": ["lance_row_count_in_bounds", "lance_schema_unchanged", "lance_version_fresh"],
        "daily_orders": ["column_schema_change"], "daily_revenue": ["column_schema_change"],
        "customer_totals": ["column_schema_change"],
        "lance_maintenance/raw_orders": [], "lance_maintenance/customer_totals": [],
        "product_embeddings": ["lance_index_coverage", "lance_index_present"], "similar_products": [],
        "lance_maintenance/product_embeddings": [],
    }
    assert {j["name"] for j in repo["jobs"] if not j["name"].startswith("__")} == {"change_raw_orders",
                                                                                 "lance_maintenance"}
    assert [(s["name"], s["sensorState"]["status"]) for s in repo["sensors"]] == [(SENSOR, "STOPPED")]


def test_sensor_driven_change_feed_under_dg_dev(tmp_path):
    lake = tmp_path / "lake"
    uri = str(lake / "raw_orders.lance")
    lance_format.write_dataset(orders_table(), uri, enable_stable_row_ids=True)  # version 1

    with dg_dev(dagster_home(tmp_path / "home"), lake, tmp_path / "dg_dev.log") as server:
        gql = server.gql
        selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "sensorName": SENSOR}
        started = gql("""mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) {
                           __typename ... on Sensor { sensorState { status } } } }""", {"s": selector})
        assert started["startSensor"]["sensorState"]["status"] == "RUNNING"

        counts = server.wait("partition 1", lambda: (c := _partition_counts(gql)).get("1") and c, 420)
        assert counts["1"] == {"inserted": 12, "updated": 0, "deleted": 0}

        # The example's op job, launched like the UI's "Launch run": it commits versions 2 (an
        # upsert) and 3 (a cancellation) and stores its op output with the Lance IO manager.
        launched = gql(LAUNCH, {"p": {"selector": {"repositoryLocationName": LOCATION,
                                                    "repositoryName": "__repository__",
                                                    "jobName": "change_raw_orders"}}})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        status = server.wait("the change_raw_orders run",
                             lambda: (s := gql(RUN_STATUS, {"id": run_id})["runOrError"]["status"])
                             in ("SUCCESS", "FAILURE", "CANCELED") and s, 420)
        assert status == "SUCCESS", server.tail()
        assert lance_format.dataset(uri).version == 3
        changes_log = lance_format.dataset(str(lake / "ops" / "source_changes.lance")).to_table()
        assert changes_log.column("version").to_pylist() == [2, 3]

        counts = server.wait("partitions 2 and 3",
                             lambda: (c := _partition_counts(gql)).get("2") and c.get("3") and c, 420)
        assert counts["2"] == {"inserted": 2, "updated": 1, "deleted": 0}
        assert counts["3"] == {"inserted": 0, "updated": 0, "deleted": 1}

        totals = lance_format.dataset(str(lake / "customer_totals.lance")).to_table().to_pylist()
        assert {r["customer"]: (r["total"], r["orders"]) for r in totals if r["orders"]} == expected_totals(uri)
