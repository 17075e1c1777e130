"""Dagster assets on ``s3+ddb://`` tables (moto's S3 and DynamoDB APIs): the IO manager and the
resource commit through the DynamoDB manifest store, with the same ``storage_options``."""

from __future__ import annotations

import dagster as dg
import lance
import pyarrow as pa
import pytest

from lance_assets import LanceIOManager, LanceTableResource
from lance_assets.resources import table_uri
from tests.engine.io.test_object_store_dynamodb import TABLE
from tests.s3_support import dynamodb_client, server_with_manifest_table


@pytest.fixture(scope="module")
def s3():
    yield from server_with_manifest_table(TABLE)


def test_table_uris_keep_the_manifest_store_query_last():
    assert table_uri("s3+ddb://b/lake?ddbTableName=t", "sales/orders") == "s3+ddb://b/lake/sales/orders.lance?ddbTableName=t"
    assert table_uri("s3+ddb://b/lake/?ddbTableName=t", dg.AssetKey(["a"])) == "s3+ddb://b/lake/a.lance?ddbTableName=t"


def test_assets_commit_through_dynamodb(s3, instance):
    opts = dict(s3.options(), dynamodb_endpoint=s3.endpoint)
    bucket = s3.new_bucket()
    base = f"s3+ddb://{bucket}/lake?ddbTableName={TABLE}"
    manager = LanceIOManager(base_uri=base, storage_options=opts)

    @dg.asset(metadata={"lance/write_mode": "append"})
    def orders() -> pa.Table:
        return pa.table({"id": [1, 2], "amount": [10.0, 20.0]})

    for _ in range(2):
        assert dg.materialize([orders], resources={"io_manager": manager}, instance=instance).success
    uri = f"s3+ddb://{bucket}/lake/orders.lance?ddbTableName={TABLE}"
    assert lance.dataset(uri, storage_options=opts).count_rows() == 4  # pylance, through the store too
    tables = LanceTableResource(base_uri=base, storage_options=opts)
    assert tables.latest_version("orders") == 2
    tables.delete("orders", "id = 1")
    assert lance.dataset(uri, storage_options=opts).count_rows() == 2
    items = dynamodb_client(s3.endpoint).query(TableName=TABLE, ConsistentRead=True,
                                               KeyConditionExpression="base_uri = :b",
                                               ExpressionAttributeValues={":b": {"S": "lake/orders.lance"}})["Items"]
    assert sorted(int(i["version"]["N"]) for i in items) == [1, 2, 3]
