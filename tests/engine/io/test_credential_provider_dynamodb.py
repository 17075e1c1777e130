"""A ``credential_provider`` on ``s3+ddb://`` tables: the DynamoDB manifest store signs with the
provider's credentials too (refreshed before they expire and once when refused), so a
long-running writer keeps committing across a key rotation. On moto's S3 and DynamoDB APIs with
its IAM checks on: only the IAM user's current keys pass; pylance reads the result back."""

from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import StorageAccessError
from lance_format.io import ObjectStore
from tests.s3_support import (
    REGION,
    delete_access_key,
    iam_access_keys,
    moto_auth,
    server_with_manifest_table,
)

TABLE = "lance-manifests-creds"
FACTORY = "tests.credential_factories:key_file_provider"


@pytest.fixture(scope="module")
def s3():
    yield from server_with_manifest_table(TABLE)


@pytest.fixture
def iam(s3):
    """``iam(user, count)``: access keys of a new IAM user; from then on IAM checks are on (only
    current keys pass) until the test ends."""

    def keys(user: str, count: int) -> list[dict[str, str]]:
        moto_auth(s3.endpoint, False)
        made = iam_access_keys(s3, user, count)
        moto_auth(s3.endpoint, True)
        return made

    try:
        yield keys
    finally:
        moto_auth(s3.endpoint, False)


def _plain(s3) -> dict[str, str]:
    """Endpoint and region, no keys: credentials come from the provider only."""
    return {**{k: v for k, v in s3.options().items() if "access" not in k}, "dynamodb_endpoint": s3.endpoint}


def _uri(bucket: str) -> str:
    return f"s3+ddb://{bucket}/tables/{bucket}.lance?ddbTableName={TABLE}"


def _versions_in_dynamodb(s3, bucket: str, key: dict[str, str]) -> list[int]:
    import boto3

    ddb = boto3.client("dynamodb", endpoint_url=s3.endpoint, region_name=REGION, **key)
    items = ddb.query(TableName=TABLE, ConsistentRead=True, KeyConditionExpression="base_uri = :b",
                      ExpressionAttributeValues={":b": {"S": f"tables/{bucket}.lance"}})["Items"]
    return sorted(int(item["version"]["N"]) for item in items)


def test_a_long_running_writer_commits_through_dynamodb_across_a_key_rotation(s3, bucket, iam):
    first, second = iam(f"writer-{bucket}", 2)
    current = {"key": first}
    calls: list[str] = []

    def provider() -> dict[str, str]:  # no expiry: only a refusal makes the stores ask again
        calls.append(current["key"]["aws_access_key_id"])
        return dict(current["key"])

    uri = _uri(bucket)
    ds = lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options={
        **_plain(s3), "credential_provider": provider})
    manifests = ds.object_store.manifest_store
    assert manifests is not None
    ddb_client = manifests.store.client
    assert set(calls) == {first["aws_access_key_id"]}
    # rotation: the provider hands out the second key, the first one is deleted
    current["key"] = second
    delete_access_key(s3, f"writer-{bucket}", first, using=second)
    calls.clear()
    ds.insert(pa.table({"id": [3]}))  # the same open stores: both are refused once, then ask again
    assert ds.version == 2 and ds.count_rows() == 3
    assert manifests.store.client is not ddb_client, "the DynamoDB store kept the deleted key"
    assert set(calls) == {second["aws_access_key_id"]}
    assert _versions_in_dynamodb(s3, bucket, second) == [1, 2]
    # the first key is really refused, by DynamoDB too (so the refresh above was needed)
    stale = ObjectStore(uri, {**_plain(s3), "credential_provider": lambda: dict(first)})
    with pytest.raises(StorageAccessError, match="DynamoDB"):
        stale.manifest_store.store.get_latest(f"tables/{bucket}.lance")
    # pylance, committing through the same DynamoDB table, sees both commits and appends on top
    official_opts = {**_plain(s3), **second}
    official = lance.dataset(uri, storage_options=official_opts)
    assert official.version == 2 and sorted(official.to_table()["id"].to_pylist()) == [1, 2, 3]
    lance.write_dataset(pa.table({"id": [4]}), uri, mode="append", storage_options=official_opts)
    again = lance_format.dataset(uri, storage_options={**_plain(s3), "credential_provider": provider})
    assert again.version == 3 and again.count_rows() == 4
    assert _versions_in_dynamodb(s3, bucket, second) == [1, 2, 3]


def test_a_provider_that_keeps_giving_a_refused_key_fails_typed_without_looping(s3, bucket, iam):
    key, = iam(f"stuck-{bucket}", 1)
    other, = iam(f"admin-{bucket}", 1)
    calls: list[int] = []

    def provider() -> dict[str, str]:
        calls.append(1)
        return dict(key)

    store = ObjectStore(_uri(bucket), {**_plain(s3), "credential_provider": provider})
    delete_access_key(s3, f"stuck-{bucket}", key, using=other)
    calls.clear()
    with pytest.raises(StorageAccessError, match="DynamoDB refused"):
        store.manifest_store.store.get_latest(f"tables/{bucket}.lance")
    assert len(calls) == 1  # asked once again after the refusal; the same key is not tried twice


def test_expiring_credentials_are_refreshed_before_dynamodb_requests(s3, bucket, iam, tmp_path):
    first, second = iam(f"expiring-{bucket}", 2)
    key_file, log = tmp_path / "key.json", tmp_path / "calls.log"
    key_file.write_text(json.dumps(first))
    opts = {**_plain(s3), "credential_provider": FACTORY,
            "credential_provider_args": json.dumps({"key_file": str(key_file), "log_file": str(log)})}
    uri = _uri(bucket)
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    store = ds.object_store.manifest_store.store
    key_file.write_text(json.dumps(second))
    log.unlink()
    # the credentials expire within the refresh margin: asked again before the request, no refusal
    assert store.get_latest(f"tables/{bucket}.lance").version == 1
    assert log.read_text().split() == [str(os.getpid()), second["aws_access_key_id"]]
    delete_access_key(s3, f"expiring-{bucket}", first, using=second)
    ds.insert(pa.table({"id": [2]}))
    assert lance.dataset(uri, storage_options={**_plain(s3), **second}).count_rows() == 2


def test_spark_commits_through_dynamodb_with_a_provider_named_by_a_string(spark, s3, bucket, iam, tmp_path):
    from lance_format import spark as lance_spark

    user = f"spark-ddb-{bucket}"
    first, second = iam(user, 2)
    key_file, log = tmp_path / "key.json", tmp_path / "calls.log"
    key_file.write_text(json.dumps(first))
    opts = {**_plain(s3), "credential_provider": FACTORY,
            "credential_provider_args": json.dumps({"key_file": str(key_file), "log_file": str(log)})}
    uri = _uri(bucket)
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string").repartition(2)
    assert lance_spark.write_dataframe(df, uri, storage_options=opts).rows == 20
    key_file.write_text(json.dumps(second))
    delete_access_key(s3, user, first, using=second)
    more = spark.createDataFrame([(i, f"n{i}") for i in range(20, 30)], "id long, name string")
    lance_spark.write_dataframe(more, uri, mode="append", storage_options=opts)
    assert _versions_in_dynamodb(s3, bucket, second) == [1, 2]
    back = lance_spark.read_dataframe(spark, uri, storage_options=opts).toPandas()
    assert sorted(back["id"].tolist()) == list(range(30))
    assert lance.dataset(uri, storage_options={**_plain(s3), **second}).count_rows() == 30
