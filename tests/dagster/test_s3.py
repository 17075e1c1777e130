"""Dagster assets stored on S3 (moto's real S3 API): LanceIOManager and LanceTableResource with
``storage_options``, for pyarrow and pandas outputs and inputs."""

from __future__ import annotations

import dagster as dg
import lance
import pandas as pd
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager, LanceTableResource
from lance_format.errors import InvalidInputError


def test_materialize_pyarrow_and_pandas_assets_on_s3(s3, instance):
    opts = s3.options()
    base = f"s3://{s3.new_bucket()}/lake"
    manager = LanceIOManager(base_uri=base, storage_options=opts)

    @dg.asset(metadata={"lance/write_mode": "append"})
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2, 3], "amount": [10.0, 20.0, 30.0]})

    @dg.asset
    def big_orders(orders: pd.DataFrame) -> pd.DataFrame:
        return orders[orders["amount"] > 15].reset_index(drop=True)

    @dg.asset
    def total(big_orders: pa.Table) -> pa.Table:
        return pa.table({"total": [sum(big_orders.column("amount").to_pylist())]})

    for _ in range(2):
        result = dg.materialize([orders, big_orders, total], resources={"io_manager": manager}, instance=instance)
        assert result.success
    assert lance.dataset(f"{base}/orders.lance", storage_options=opts).count_rows() == 6
    assert lance.dataset(f"{base}/orders.lance", storage_options=opts).version == 2
    assert lance.dataset(f"{base}/big_orders.lance", storage_options=opts).count_rows() == 4
    assert lance_format.dataset(f"{base}/total.lance", storage_options=opts).to_table().to_pydict() == {
        "total": [100.0]}
    meta = result.asset_materializations_for_node("total")[0].metadata
    assert meta["dagster/uri"].value == f"{base}/total.lance"

    # the same tables through the resource, reading and merging
    tables = LanceTableResource(base_uri=base, storage_options=opts)
    assert tables.exists("orders") and tables.latest_version("orders") == 2
    ds, counts = tables.merge("orders", pa.table({"id": [1, 9], "amount": [11.0, 90.0]}), on="id")
    assert counts["inserted"] == 1 and counts["updated"] == 2  # id 1 occurs twice after two appends
    assert tables.read("orders", filter="id = 9").column("amount").to_pylist() == [90.0]
    tables.delete("orders", "id = 9")
    assert tables.open("orders").count_rows() == 6


def test_resource_without_options_cannot_reach_the_bucket_and_bad_keys_are_named(s3, instance, monkeypatch):
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(variable, raising=False)
    base = f"s3://{s3.new_bucket()}/lake"
    bad = LanceTableResource(base_uri=base, storage_options={**s3.options(), "aws_secret_key": "x"})
    with pytest.raises(InvalidInputError, match="aws_secret_key"):
        bad.write("t", pa.table({"id": [1]}))

    @dg.asset
    def numbers() -> pa.Table:
        return pa.table({"n": [1]})

    wrong = LanceIOManager(base_uri=base, storage_options={**s3.options(), "aws_endpoint": "http://127.0.0.1:9"})
    result = dg.materialize([numbers], resources={"io_manager": wrong}, instance=instance, raise_on_error=False)
    assert not result.success  # nothing listens there: the write fails instead of going elsewhere
    assert s3.keys(base.split("/")[2]) == []


def test_version_sensor_and_observable_table_on_s3(s3, instance):
    import json

    from lance_assets import LanceTableWatch, lance_version_sensor, observable_lance_table

    opts = s3.options()
    uri = f"s3://{s3.new_bucket()}/ext.lance"
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts)
    sensor = lance_version_sensor(
        [LanceTableWatch(name="ext", uri=uri, asset_key=dg.AssetKey("ext"), storage_options=opts)],
        name="ext_sensor", mode="observe",
    )
    result = sensor(dg.build_sensor_context(instance=instance, cursor=json.dumps({"ext": 0})))
    assert [e.tags["dagster/data_version"] for e in result.asset_events] == ["1", "2"]
    assert result.asset_events[-1].metadata["dagster/row_count"].value == 2
    source = observable_lance_table(["ext_source"], uri, storage_options=opts)
    job = dg.define_asset_job("observe_ext", selection=[source])
    defs = dg.Definitions(assets=[source], jobs=[job])
    assert defs.resolve_job_def("observe_ext").execute_in_process(instance=instance).success
    (record,) = instance.fetch_observations(dg.AssetKey("ext_source"), limit=1).records
    assert record.asset_observation.tags["dagster/data_version"] == "2"


def test_io_manager_configured_from_yaml_takes_a_named_credential_provider(s3, instance, tmp_path):
    # Dagster resource config is strings (YAML, dg.EnvVar): the provider is named, made by the
    # run's own process, and keeps handing out the current key of the IAM user.
    import json

    import yaml

    from tests.s3_support import delete_access_key, iam_access_keys, moto_auth

    bucket = s3.new_bucket()
    user = f"dagster-{bucket}"
    first, second = iam_access_keys(s3, user, 2)
    key_file, log = tmp_path / "key.json", tmp_path / "calls.log"
    key_file.write_text(json.dumps(first))
    plain = {k: v for k, v in s3.options().items() if "access" not in k}
    base = f"s3://{bucket}/lake"
    run_config = yaml.safe_load(f"""
resources:
  io_manager:
    config:
      base_uri: {base}
      storage_options:
        aws_endpoint: {plain['aws_endpoint']}
        aws_region: {plain['aws_region']}
        allow_http: "true"
        credential_provider: "tests.credential_factories:key_file_provider"
        credential_provider_args: '{json.dumps({"key_file": str(key_file), "log_file": str(log)})}'
""")

    @dg.asset(metadata={"lance/write_mode": "append"})
    def events() -> pa.Table:
        return pa.table({"id": [1, 2]})

    moto_auth(s3.endpoint, True)
    try:
        for key in (first, second):
            key_file.write_text(json.dumps(key))
            if key is second:
                delete_access_key(s3, user, first, using=second)  # rotated between the runs
            result = dg.materialize([events], resources={"io_manager": LanceIOManager.configure_at_launch()},
                                    run_config=run_config, instance=instance)
            assert result.success
        assert {line.split()[1] for line in log.read_text().splitlines()} == {
            first["aws_access_key_id"], second["aws_access_key_id"]}
        assert lance.dataset(f"{base}/events.lance", storage_options={**plain, **second}).count_rows() == 4
        tables = LanceTableResource(base_uri=base, storage_options=run_config["resources"]["io_manager"]["config"][
            "storage_options"])
        assert tables.read("events").num_rows == 4
    finally:
        moto_auth(s3.endpoint, False)
