"""Benchmark: one ``lance_version_sensor`` tick on tables with 100 and 10,000 versions.

The sensor probes only the versions after its cursor, so a tick should cost the same whatever
the history. Measured per table size (median of ``--repeat`` ticks, sensor evaluation only):

* idle tick: no new version (the common case);
* busy tick: one new version (adds a dynamic partition request and a run request);
* for comparison, one full listing of ``_versions/`` (what a listing-based sensor pays).

Histories are built fast: version 1 is a real commit, versions 2..N-1 are copies of its manifest
renumbered under their V2 names (the sensor only reads names and the hint), and the last version
is a real append. Target: a tick on 10,000 versions under 100 ms.

Run: ``python benchmarks/bench_sensor.py [--versions 100 10000] [--repeat 30]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import warnings

import pyarrow as pa

warnings.filterwarnings("ignore")
logging.getLogger("dagster").setLevel(logging.WARNING)  # the sensor logs every busy tick

import dagster as dg  # noqa: E402

import lance_format  # noqa: E402
from lance_assets import LanceTableWatch, lance_version_sensor  # noqa: E402
from lance_format.io import object_store_for  # noqa: E402
from lance_format.table.manifest import encode_manifest, read_manifest  # noqa: E402
from lance_format.table.naming import ManifestNaming, list_versions, manifest_path  # noqa: E402


def build_history(uri: str, versions: int) -> None:
    lance_format.write_dataset(pa.table({"id": [0]}), uri, enable_stable_row_ids=True)
    store = object_store_for(uri)
    first = read_manifest(store, manifest_path(1, ManifestNaming.V2))
    for version in range(2, versions):
        first.manifest.version = version
        store.write_bytes(manifest_path(version, ManifestNaming.V2),
                          encode_manifest(first.manifest, first.transaction, first.index_section))
    store.replace_bytes("_versions/latest_version_hint.json", json.dumps({"version": versions - 1}).encode())
    lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append")  # a real commit: version N
    assert lance_format.dataset(uri).version == versions


def median_ms(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench(versions: int, repeat: int) -> dict:
    root = tempfile.mkdtemp(prefix="lance-bench-sensor-")
    uri = f"{root}/t.lance"
    build_history(uri, versions)
    partitions = dg.DynamicPartitionsDefinition(name="t_versions")

    @dg.asset(partitions_def=partitions)
    def consumer() -> None:
        return None

    sensor = lance_version_sensor(LanceTableWatch(name="t", uri=uri, partitions_def=partitions, assets=[consumer]),
                                  name="bench_sensor")
    with dg.instance_for_test() as instance:
        idle = dg.build_sensor_context(instance=instance, cursor=json.dumps({"t": versions}))
        busy = dg.build_sensor_context(instance=instance, cursor=json.dumps({"t": versions - 1}))
        assert isinstance(sensor(idle), dg.SkipReason)
        assert [r.partition_key for r in sensor(busy).run_requests] == [str(versions)]
        return {
            "versions": versions,
            "idle_tick_ms": round(median_ms(lambda: sensor(idle), repeat), 3),
            "busy_tick_ms": round(median_ms(lambda: sensor(busy), repeat), 3),
            "full_listing_ms": round(median_ms(lambda: list_versions(object_store_for(uri)), max(3, repeat // 5)), 3),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    for versions in args.versions:
        print(json.dumps(bench(versions, args.repeat)))


if __name__ == "__main__":
    main()
