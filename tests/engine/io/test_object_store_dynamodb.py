"""``s3+ddb://`` tables: commits coordinated through DynamoDB, on moto's real S3 and DynamoDB
APIs (one server), against pylance committing through the same DynamoDB table: Lance's item
layout, alternating and concurrent writers of both engines (threads and processes), a writer
killed between the conditional put and the finalization and the recovery by the next reader or
writer of either engine, refused conditional puts, throttling and validation."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, StorageThrottledError
from lance_format.io import ObjectStore
from lance_format.io.dynamodb import DynamoDBManifestStore
from lance_format.io.manifest_store import final_path_of
from lance_format.table.naming import list_versions
from tests.s3_support import create_manifest_table, dynamodb_client, server_with_manifest_table
from tests.storage_contract import check_concurrent_committers, check_history_matches_local, check_tags

REPO = Path(__file__).resolve().parents[3]
TABLE = "lance-manifests"


@pytest.fixture(scope="module")
def s3():
    yield from server_with_manifest_table(TABLE)


@pytest.fixture
def opts(s3):
    # Lance's keys: the S3 ones plus dynamodb_endpoint, accepted by this engine and pylance alike
    return dict(s3.options(), dynamodb_endpoint=s3.endpoint)


def _uri(bucket: str) -> str:
    # Lance keys a table by its path without the bucket: each test's table has its own path.
    return f"s3+ddb://{bucket}/tables/{bucket}.lance?ddbTableName={TABLE}"


def _items(s3, bucket: str) -> dict[int, dict]:
    base = f"tables/{bucket}.lance"
    response = dynamodb_client(s3.endpoint).query(TableName=TABLE, ConsistentRead=True, KeyConditionExpression="base_uri = :b",
                                       ExpressionAttributeValues={":b": {"S": base}})
    return {int(item["version"]["N"]): item for item in response["Items"]}


def _ids(uri: str, opts: dict, engine: str = "ours") -> list[int]:
    ds = lance_format.dataset(uri, storage_options=opts) if engine == "ours" else lance.dataset(uri, storage_options=opts)
    return sorted(ds.to_table().column("id").to_pylist())


def test_history_through_dynamodb_matches_local(s3, bucket, opts, tmp_path):
    uri = _uri(bucket)
    latest = check_history_matches_local(uri, opts, str(tmp_path / "local.lance"))
    items = _items(s3, bucket)
    assert sorted(items) == list(range(1, latest + 1))
    assert _ids(uri, opts, "pylance") == _ids(uri, opts)


def test_items_have_lances_layout_and_both_engines_alternate(s3, bucket, opts):
    uri = _uri(bucket)
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    lance.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    lance_format.dataset(uri, storage_options=opts).delete("id = 1")
    lance.dataset(uri, storage_options=opts).delete("id = 2")
    lance_format.write_dataset(pa.table({"id": [4]}), uri, mode="append", storage_options=opts)
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == [3, 4]
    theirs = lance.dataset(uri, storage_options=opts)
    assert [v["version"] for v in lance_format.dataset(uri, storage_options=opts).versions()] == \
        [v["version"] for v in theirs.versions()] == [1, 2, 3, 4, 5]

    items = _items(s3, bucket)
    assert {v: items[v]["committer"]["S"] for v in items} == {
        1: "lance_format", 2: "lancedb", 3: "lance_format", 4: "lancedb", 5: "lance_format"}
    store = ObjectStore(f"s3://{bucket}/tables/{bucket}.lance", s3.options())
    for version, item in items.items():
        # the same attributes as pylance's items, the manifest's path under the bucket, its size
        assert set(item) == set(items[2]) == {"base_uri", "version", "path", "size", "committer"}
        assert item["base_uri"] == {"S": f"tables/{bucket}.lance"}
        relative = item["path"]["S"].removeprefix(f"tables/{bucket}.lance/")
        assert relative == list_versions(store).versions[version]
        assert int(item["size"]["N"]) == store.size(relative)


def test_concurrent_committers_through_dynamodb(bucket, opts):
    check_concurrent_committers(_uri(bucket), opts, writers=3, read=lambda u: _ids(u, opts, "pylance"))


def test_two_processes_of_different_engines_coordinate(bucket, opts):
    uri = _uri(bucket)
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    rounds = 4
    script = f"""
        import sys, pyarrow as pa
        engine, uri, opts, first = sys.argv[1], sys.argv[2], eval(sys.argv[3]), int(sys.argv[4])
        if engine == "ours":
            import lance_format as writer
        else:
            import lance as writer
        for i in range(first, first + {rounds}):
            writer.write_dataset(pa.table({{"id": [i]}}), uri, mode="append", storage_options=opts)
    """
    procs = []
    for engine, first in (("ours", 100), ("pylance", 200)):
        env = dict(os.environ, PYTHONPATH=str(REPO))
        procs.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), engine, uri, repr(opts),
                                       str(first)], env=env, cwd=str(REPO), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    expected = [0] + list(range(100, 100 + rounds)) + list(range(200, 200 + rounds))
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == expected
    versions = [v["version"] for v in lance.dataset(uri, storage_options=opts).versions()]
    assert versions == list(range(1, 2 + 2 * rounds))  # one version per append, none lost


_KILLED_WRITER = """
    import os, sys, pyarrow as pa
    import lance_format
    from lance_format.io.manifest_store import ExternalManifests

    def killed(*args, **kwargs):
        os._exit(9)  # dies right after the conditional put of the staged entry

    ExternalManifests._finish = killed
    lance_format.write_dataset(pa.table({"id": [2]}), sys.argv[1], mode="append", storage_options=eval(sys.argv[2]))
"""


@pytest.mark.parametrize("next_step", ["our reader", "pylance reader", "our writer", "pylance writer"])
def test_a_writer_killed_between_the_two_steps_is_recovered(s3, bucket, opts, next_step):
    uri = _uri(bucket)
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), uri, repr(opts)],
                          env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=str(REPO), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 9, proc.stderr[-3000:]
    item = _items(s3, bucket)[2]
    staged = item["path"]["S"]
    final = final_path_of(staged)
    keys = s3.keys(bucket, f"tables/{bucket}.lance/_versions/")
    assert staged in keys and final not in keys  # committed, but only staged

    if next_step == "our reader":
        assert lance_format.dataset(uri, storage_options=opts).version == 2
    elif next_step == "pylance reader":
        assert lance.dataset(uri, storage_options=opts).version == 2
    elif next_step == "our writer":
        lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    else:
        lance.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    expected = [1, 2, 3] if "writer" in next_step else [1, 2]
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == expected
    keys = s3.keys(bucket, f"tables/{bucket}.lance/_versions/")
    assert final in keys and staged not in keys
    assert _items(s3, bucket)[2]["path"]["S"] == final


def test_we_finish_a_pylance_commit_stopped_halfway(s3, bucket, opts):
    uri = _uri(bucket)
    lance.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    lance.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts)
    # Put version 2 back into the state pylance leaves when it dies after its conditional put:
    # the manifest only under a staging name (Lance's: <final>-<uuid>), the entry pointing at it.
    client, item = s3.client(), _items(s3, bucket)[2]
    final = item["path"]["S"]
    staged = f"{final}-{uuid.uuid4()}"
    client.copy_object(Bucket=bucket, Key=staged, CopySource={"Bucket": bucket, "Key": final})
    client.delete_object(Bucket=bucket, Key=final)
    item["path"] = {"S": staged}
    dynamodb_client(s3.endpoint).put_item(TableName=TABLE, Item=item)

    assert _ids(uri, opts) == [1, 2]  # our reader finishes it
    assert _items(s3, bucket)[2]["path"]["S"] == final
    keys = s3.keys(bucket, f"tables/{bucket}.lance/_versions/")
    assert final in keys and staged not in keys
    assert _ids(uri, opts, "pylance") == [1, 2]


def test_a_refused_conditional_put_is_retried_on_top_of_the_winner(bucket, opts, monkeypatch):
    uri = _uri(bucket)
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    original = DynamoDBManifestStore.put_if_not_exists
    outcomes: list[bool] = []

    def racing(self, base_uri, location):
        if not outcomes:  # pylance takes the version first: DynamoDB refuses our conditional put
            lance.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts)
        outcomes.append(original(self, base_uri, location))
        return outcomes[-1]

    monkeypatch.setattr(DynamoDBManifestStore, "put_if_not_exists", racing)
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    monkeypatch.undo()
    assert outcomes == [False, True]
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == [1, 2, 3]
    assert lance.dataset(uri, storage_options=opts).version == 3


def test_tags_and_pickled_stores(bucket, opts):
    uri = _uri(bucket)
    check_tags(uri, opts)
    store = ObjectStore(uri, opts)
    again = pickle.loads(pickle.dumps(store))  # Spark executors re-open the store from uri and options
    assert again.uri == uri and again.manifest_store is not None
    assert again.manifest_store.latest(again) == store.manifest_store.latest(store) == (
        2, "_versions/18446744073709551613.manifest")


def test_endpoint_from_the_environment(s3, bucket, monkeypatch):
    monkeypatch.setenv("DYNAMODB_ENDPOINT", s3.endpoint)
    uri = _uri(bucket)
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=s3.options())
    assert sorted(_items(s3, bucket)) == [1]


def test_uri_and_table_validation(s3, bucket, opts):
    for bad in (f"s3+ddb://{bucket}/t.lance", f"s3+ddb://{bucket}/t.lance?ddbTableName=",
                f"s3+ddb://{bucket}/t.lance?ddbTableName={TABLE}&x=1", f"s3+ddb://{bucket}/t.lance?table={TABLE}"):
        with pytest.raises(InvalidInputError, match="ddbTableName"):
            lance_format.write_dataset(pa.table({"id": [1]}), bad, storage_options=opts)
    with pytest.raises(InvalidInputError, match="does not exist"):
        lance_format.dataset(f"s3+ddb://{bucket}/t.lance?ddbTableName=no-such-table", storage_options=opts)
    wrong = f"wrong-keys-{uuid.uuid4().hex[:8]}"
    create_manifest_table(s3.endpoint, wrong, hash_key="uri", range_key="v")
    with pytest.raises(InvalidInputError, match="key schema"):
        lance_format.dataset(f"s3+ddb://{bucket}/t.lance?ddbTableName={wrong}", storage_options=opts)
    assert s3.keys(bucket) == []


class _ThrottlingClient:
    """A DynamoDB client that throttles the first ``throttles`` requests (moto never throttles)."""

    def __init__(self, real, throttles: int) -> None:
        self.real, self.throttles, self.calls = real, throttles, 0

    def __getattr__(self, name):
        from botocore.exceptions import ClientError

        def call(**kwargs):
            self.calls += 1
            if self.calls <= self.throttles:
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"},
                                   "ResponseMetadata": {"HTTPStatusCode": 400}}, name)
            return getattr(self.real, name)(**kwargs)

        return call


def test_throttling_is_retried_then_typed(s3, bucket, monkeypatch):
    monkeypatch.setattr("lance_format.io.backend.backoff_delay", lambda attempt: 0.0)
    store = DynamoDBManifestStore(_ThrottlingClient(dynamodb_client(s3.endpoint), 3), TABLE, endpoint="fake", max_retries=5)
    assert store.get_latest(f"nothing/{bucket}") is None  # 3 throttled requests, then the answer
    store = DynamoDBManifestStore(_ThrottlingClient(dynamodb_client(s3.endpoint), 1000), TABLE, endpoint="fake",
                                  max_retries=2)
    with pytest.raises(StorageThrottledError, match="DynamoDB"):
        store.get_latest(f"nothing/{bucket}")


def test_a_table_written_before_the_store_moves_onto_it(s3, bucket, opts):
    """A table committed without the store (plain s3://) has no entries: its versions are found by
    listing, and the next commits through the store continue its history (both engines)."""
    plain = f"s3://{bucket}/tables/{bucket}.lance"
    lance_format.write_dataset(pa.table({"id": [1]}), plain, storage_options=s3.options())
    lance.write_dataset(pa.table({"id": [2]}), plain, mode="append", storage_options=s3.options())
    uri = _uri(bucket)
    assert lance_format.dataset(uri, storage_options=opts).version == 2 and _items(s3, bucket) == {}
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    lance.write_dataset(pa.table({"id": [4]}), uri, mode="append", storage_options=opts)
    assert sorted(_items(s3, bucket)) == [3, 4]
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == [1, 2, 3, 4]
    assert [v["version"] for v in lance_format.dataset(uri, storage_options=opts).versions()] == [1, 2, 3, 4]


def test_branches_commit_through_the_store(s3, bucket, opts):
    uri = _uri(bucket)
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    dev = ds.create_branch("dev")
    lance_format.write_dataset(pa.table({"id": [2]}), dev.uri, mode="append", storage_options=opts)
    assert dev.uri == f"s3+ddb://{bucket}/tables/{bucket}.lance/tree/dev?ddbTableName={TABLE}"
    branch = lance_format.dataset(uri, version=("dev", None), storage_options=opts)
    assert sorted(branch.to_table().column("id").to_pylist()) == [1, 2]
    assert _ids(uri, opts) == [1]
    response = dynamodb_client(s3.endpoint).query(TableName=TABLE, ConsistentRead=True, KeyConditionExpression="base_uri = :b",
                                       ExpressionAttributeValues={":b": {"S": f"tables/{bucket}.lance/tree/dev"}})
    branch_versions = [v["version"] for v in lance_format.dataset(dev.uri, storage_options=opts).versions()]
    assert sorted(int(i["version"]["N"]) for i in response["Items"]) == branch_versions and len(branch_versions) == 2


def test_spark_writes_and_reads_through_the_store(spark, s3, bucket, opts):
    from lance_format import spark as lance_spark

    uri = _uri(bucket)
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string").repartition(2)
    assert lance_spark.write_dataframe(df, uri, storage_options=opts).version == 1
    updates = spark.createDataFrame([(3, "three"), (50, "fifty")], "id long, name string")
    merged = lance_spark.merge_dataframe(updates, uri, on="id", storage_options=opts)
    assert (merged.version, merged.rows_updated, merged.rows_inserted) == (2, 1, 1)
    back = lance_spark.read_dataframe(spark, uri, storage_options=opts, filter="id >= 5").toPandas()
    assert sorted(back["id"].tolist()) == list(range(5, 20)) + [50]
    assert sorted(_items(s3, bucket)) == [1, 2]
    assert lance.dataset(uri, storage_options=opts).to_table(filter="id = 3").column("name").to_pylist() == ["three"]


@pytest.mark.parametrize("cleaner", ["ours", "pylance"])
def test_cleanup_keeps_the_items_of_removed_versions_like_pylance(s3, opts, cleaner):
    # pylance's cleanup deletes old manifests from the bucket and leaves their DynamoDB items;
    # so does this engine's. Neither engine then opens a removed version, and commits go on
    # numbering after the latest item.
    import time
    from datetime import timedelta

    from lance_format.errors import VersionNotFoundError

    bucket = s3.new_bucket()
    uri = _uri(bucket)
    for i in range(4):
        engine = lance_format if i % 2 else lance
        engine.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i else "create", storage_options=opts)
    time.sleep(0.05)
    ds = lance_format.dataset(uri, storage_options=opts) if cleaner == "ours" else \
        lance.dataset(uri, storage_options=opts)
    stats = ds.cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == 3
    assert sorted(_items(s3, bucket)) == [1, 2, 3, 4]
    assert [k for k in s3.keys(bucket, f"tables/{bucket}.lance/_versions/")] == \
        [f"tables/{bucket}.lance/_versions/{2**64 - 1 - 4:020d}.manifest"]
    for engine in (lance_format, lance):
        assert [v["version"] for v in engine.dataset(uri, storage_options=opts).versions()] == [4]
    with pytest.raises(VersionNotFoundError):
        lance_format.dataset(uri, version=2, storage_options=opts)
    with pytest.raises(ValueError, match="not found"):
        lance.dataset(uri, version=2, storage_options=opts)
    lance.write_dataset(pa.table({"id": [9]}), uri, mode="append", storage_options=opts)
    lance_format.write_dataset(pa.table({"id": [10]}), uri, mode="append", storage_options=opts)
    assert sorted(_items(s3, bucket)) == [1, 2, 3, 4, 5, 6]
    assert _ids(uri, opts) == _ids(uri, opts, "pylance") == [0, 1, 2, 3, 9, 10]
