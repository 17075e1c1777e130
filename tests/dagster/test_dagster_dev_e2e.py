"""End to end under ``dagster dev``: sensor on via GraphQL, the example's op job changes the
source, change-feed runs follow.

``dagster dev`` runs as its own process group on a free port (started with
``start_new_session=True`` so it handles SIGINT, and stopped with SIGINT). The raw table is
seeded with pyarrow (no JVM needed); the ``change_raw_orders`` job (launched through GraphQL, run
by dagster dev's run worker) makes two Lance commits, and the test waits for the sensor-driven
runs of those versions' partitions and checks their change counts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import lance_format
from example_project.source import expected_totals, orders_table

REPO = Path(__file__).resolve().parents[2]
DAGSTER = Path(sys.executable).with_name("dagster")
LOCATION = "example_project"  # code_location_name in pyproject.toml
SENSOR = "raw_orders_versions_sensor"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GraphQL:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/graphql"

    def __call__(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = json.loads(response.read())
        assert "errors" not in payload, payload
        return payload["data"]


def _wait(what: str, predicate, timeout: float, process: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"dagster dev exited ({process.returncode}) while waiting for {what}:\n"
                                 + log.read_text()[-4000:])
        try:
            value = predicate()
        except (OSError, AssertionError, KeyError, TypeError):
            value = None
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}:\n" + log.read_text()[-4000:])


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


def test_sensor_driven_change_feed_under_dagster_dev(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    lake = tmp_path / "lake"
    uri = str(lake / "raw_orders.lance")
    lance_format.write_dataset(orders_table(), uri, enable_stable_row_ids=True)  # version 1

    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LANCE_EXAMPLE_ROOT": str(lake), "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(REPO)}
    log = tmp_path / "dagster_dev.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            # No -m: the [tool.dagster] block of pyproject.toml names the module, as in the README.
            [str(DAGSTER), "dev", "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    gql = GraphQL(port)
    try:
        _wait("the code location", lambda: any(
            entry["loadStatus"] == "LOADED"
            for entry in gql("{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }")
            ["workspaceOrError"]["locationEntries"]), 180, process, log)
        selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "sensorName": SENSOR}
        started = gql("""mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) {
                           __typename ... on Sensor { sensorState { status } } } }""", {"s": selector})
        assert started["startSensor"]["sensorState"]["status"] == "RUNNING"

        counts = _wait("partition 1", lambda: (c := _partition_counts(gql)).get("1") and c, 420, process, log)
        assert counts["1"] == {"inserted": 12, "updated": 0, "deleted": 0}

        # The example's op job, launched like the UI's "Launch run": it commits versions 2 (an
        # upsert) and 3 (a cancellation) and stores its op output with the Lance IO manager.
        launched = gql(LAUNCH, {"p": {"selector": {"repositoryLocationName": LOCATION,
                                                    "repositoryName": "__repository__",
                                                    "jobName": "change_raw_orders"}}})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        status = _wait("the change_raw_orders run", lambda: (s := gql(RUN_STATUS, {"id": run_id})["runOrError"]
                                                              ["status"]) in ("SUCCESS", "FAILURE", "CANCELED") and s,
                       420, process, log)
        assert status == "SUCCESS", log.read_text()[-4000:]
        assert lance_format.dataset(uri).version == 3
        changes_log = lance_format.dataset(str(lake / "ops" / "source_changes.lance")).to_table()
        assert changes_log.column("version").to_pylist() == [2, 3]

        counts = _wait("partitions 2 and 3", lambda: (c := _partition_counts(gql)).get("2") and c.get("3") and c,
                       420, process, log)
        assert counts["2"] == {"inserted": 2, "updated": 1, "deleted": 0}
        assert counts["3"] == {"inserted": 0, "updated": 0, "deleted": 1}

        totals = lance_format.dataset(str(lake / "customer_totals.lance")).to_table().to_pylist()
        assert {r["customer"]: (r["total"], r["orders"]) for r in totals if r["orders"]} == expected_totals(uri)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
    assert process.returncode == 0, log.read_text()[-4000:]
