"""Tables on S3 (moto's real S3 API): every write path, atomic commits, pylance interop,
storage-option validation, the optional boto3 dependency, and a Spark write + read."""

from __future__ import annotations

import pickle
import sys
import threading
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CommitConflictError,
    DatasetNotFoundError,
    InvalidInputError,
    TagError,
    UnsupportedFeatureError,
)
from lance_format.io import ObjectStore
from lance_format.io.storage_options import normalize_storage_options, s3_config
from tests.compat import SYSTEM, assert_tables_equal
from tests.storage_contract import history, mutate, sorted_table


def _assert_same_as_pylance(uri: str, opts: dict, version: int) -> None:
    ours = lance_format.dataset(uri, version=version, storage_options=opts)
    theirs = lance.dataset(uri, version=version, storage_options=opts)
    assert ours.schema.equals(theirs.schema, check_metadata=True)
    cols = ours.schema.names + SYSTEM
    assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols), f"s3 version {version}")


def test_every_write_path_on_s3_matches_local_and_pylance(s3, bucket, tmp_path):
    opts = s3.options()
    uri = f"s3://{bucket}/tables/people.lance"
    local = str(tmp_path / "people.lance")
    latest = mutate(uri, opts)
    assert mutate(local, None) == latest >= 6

    remote_history, local_history = history(uri, opts), history(local)
    assert len(remote_history) == latest
    for version, (a, b) in enumerate(zip(remote_history, local_history), start=1):
        assert a.equals(b), f"version {version} differs between S3 and local"

    # pylance opens our S3 table: the same versions, rows and system columns
    theirs = lance.dataset(uri, storage_options=opts)
    ours = lance_format.dataset(uri, storage_options=opts)
    assert ours.versions() == theirs.versions()
    for v in range(1, latest + 1):
        _assert_same_as_pylance(uri, opts, v)

    # nothing on S3 looks like a directory object or a staging file, and no hint (like pylance)
    keys = s3.keys(bucket, "tables/people.lance/")
    assert keys and not [k for k in keys if k.endswith("/") or "/.tmp" in k or k.endswith("hint.json")]

    # cleanup lists prefixes and deletes what only old versions referenced
    stats = ours.cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == latest - 1 and stats.data_files_removed > 0
    assert [v["version"] for v in lance.dataset(uri, storage_options=opts).versions()] == [latest]
    assert sorted_table(lance_format.dataset(uri, storage_options=opts).to_table()).equals(local_history[-1])
    data = [k for k in s3.keys(bucket, "tables/people.lance/data/")]
    assert len(data) == len(lance_format.dataset(uri, storage_options=opts).manifest.fragments)


def test_we_read_and_extend_a_table_pylance_wrote_on_s3(s3, bucket):
    opts = s3.options()
    uri = f"s3://{bucket}/theirs.lance"
    lance.write_dataset(pa.table({"id": [1, 2], "v": [0.5, 1.5]}), uri, storage_options=opts)
    lance.write_dataset(pa.table({"id": [3], "v": [2.5]}), uri, mode="append", storage_options=opts)
    lance.dataset(uri, storage_options=opts).delete("id = 1")
    for v in (1, 2, 3):
        _assert_same_as_pylance(uri, opts, v)
    ours = lance_format.dataset(uri, storage_options=opts)
    assert ours.versions() == lance.dataset(uri, storage_options=opts).versions()
    ours.update({"v": "v * 2"}, where="id = 3")
    assert lance.dataset(uri, storage_options=opts).to_table().sort_by("id").to_pydict() == {
        "id": [2, 3], "v": [1.5, 5.0]}


def test_put_if_not_exists_refuses_an_existing_key(s3, bucket):
    store = ObjectStore(f"s3://{bucket}/t", s3.options())
    assert store.put_if_not_exists("_versions/x.bin", b"first") is True
    assert store.put_if_not_exists("_versions/x.bin", b"second") is False
    assert store.read_bytes("_versions/x.bin") == b"first"
    assert [i.base_name for i in store.list_dir("_versions")] == ["x.bin"]
    assert store.list_dir("nothing-here") == []


def test_racing_conditional_puts_have_exactly_one_winner(s3, bucket):
    store = ObjectStore(f"s3://{bucket}/t", s3.options())
    barrier = threading.Barrier(6)
    results: list[bool] = []

    def put(i: int) -> None:
        barrier.wait()
        results.append(store.put_if_not_exists("_versions/race.manifest", f"writer {i}".encode()))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]


def test_concurrent_committers_on_s3_lose_no_update(s3, bucket):
    opts = s3.options()
    uri = f"s3://{bucket}/c.lance"
    lance_format.write_dataset(pa.table({"id": [0], "w": [0]}), uri, storage_options=opts)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            barrier.wait()
            lance_format.write_dataset(pa.table({"id": [writer], "w": [writer]}), uri, mode="append",
                                       storage_options=opts)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors  # appends never conflict: the loser rebases onto the winner's version
    ds = lance_format.dataset(uri, storage_options=opts)
    assert ds.version == 3 and sorted(ds.to_table().column("id").to_pylist()) == [0, 1, 2]

    # Two updates of the same row from the same read version: the second one must not land
    # on top of the first as if it had read it (no lost update): it conflicts or rebases.
    first = lance_format.dataset(uri, storage_options=opts)
    second = lance_format.dataset(uri, storage_options=opts)
    first.update({"w": "w + 10"}, where="id = 1")
    try:
        second.update({"w": "w + 100"}, where="id = 1")
    except CommitConflictError:
        expected = 11
    else:
        expected = 111
    final = lance_format.dataset(uri, storage_options=opts).to_table(filter="id = 1")
    assert final.column("w").to_pylist() == [expected]
    assert lance.dataset(uri, storage_options=opts).to_table(filter="id = 1").column("w").to_pylist() == [expected]


def test_tags_on_s3(s3, bucket):
    opts = s3.options()
    uri = f"s3://{bucket}/tagged.lance"
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    ds.tags.create("first", 1)
    with pytest.raises(TagError):
        ds.tags.create("first", 1)
    assert lance.dataset(uri, storage_options=opts).tags.list()["first"]["version"] == 1
    assert lance_format.dataset(uri, version="first", storage_options=opts).version == 1


def test_missing_table_and_missing_bucket(s3, bucket):
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(f"s3://{bucket}/nothing.lance", storage_options=s3.options())
    with pytest.raises(OSError):
        lance_format.write_dataset(pa.table({"id": [1]}), "s3://no-such-bucket-xyz/t.lance",
                                   storage_options=s3.options())


def test_commit_without_boto3_is_refused_cleanly(s3, bucket, monkeypatch):
    opts = s3.options()
    uri = f"s3://{bucket}/noboto.lance"
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` now raises ImportError
    with pytest.raises(UnsupportedFeatureError, match=r"lance-assets\[s3\]"):
        lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    monkeypatch.delitem(sys.modules, "boto3")
    assert not [k for k in s3.keys(bucket) if "_versions/" in k]  # no version was published
    # reading needs no boto3
    lance.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts, mode="overwrite")
    monkeypatch.setitem(sys.modules, "boto3", None)
    assert lance_format.dataset(uri, storage_options=opts).count_rows() == 1


def test_store_pickles_with_its_options(s3, bucket):
    store = ObjectStore(f"s3://{bucket}/p", s3.options())
    store.write_bytes("a.bin", b"x")
    again = pickle.loads(pickle.dumps(store))
    assert again.uri == f"s3://{bucket}/p" and again.storage_options == store.storage_options
    assert again.read_bytes("a.bin") == b"x"


def test_dynamodb_options_shared_with_s3_ddb_tables_are_ignored_on_plain_s3(s3, bucket):
    # pylance takes one storage_options dict for every table, s3+ddb:// or not, and ignores the
    # DynamoDB endpoint where no manifest store is involved; so does this engine.
    opts = {**s3.options(), "dynamodb_endpoint": "http://127.0.0.1:9", "DynamoDB_Endpoint": "http://127.0.0.1:9"}
    ours, theirs = f"s3://{bucket}/ours.lance", f"s3://{bucket}/theirs.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), ours, storage_options=opts)
    lance.write_dataset(pa.table({"id": [1, 2]}), theirs, storage_options=opts)
    assert lance.dataset(ours, storage_options=opts).to_table().column("id").to_pylist() == [1, 2]
    assert lance_format.dataset(theirs, storage_options=opts).to_table().column("id").to_pylist() == [1, 2]
    assert ObjectStore(ours, opts).storage_options["dynamodb_endpoint"] == "http://127.0.0.1:9"  # still shipped
    # a bad value is not checked where it is not used, but a misspelt key still is
    ObjectStore("memory://ddb-shared", {"dynamodb_endpoint": "not a url"})
    with pytest.raises(InvalidInputError, match="dynamodb_endpiont"):
        ObjectStore(ours, {**opts, "dynamodb_endpiont": "http://127.0.0.1:9"})


# -- storage options: validation (no server needed) ---------------------------------------------
def test_unknown_and_unsupported_options_are_named():
    with pytest.raises(InvalidInputError, match="aws_acess_key_id"):
        ObjectStore("s3://b/t", {"aws_acess_key_id": "x"})
    with pytest.raises(UnsupportedFeatureError, match="aws_server_side_encryption"):
        ObjectStore("s3://b/t", {"aws_server_side_encryption": "aws:kms", "aws_region": "us-east-1"})
    with pytest.raises(InvalidInputError, match="allow_http"):
        ObjectStore("s3://b/t", {"aws_endpoint": "http://127.0.0.1:1", "aws_region": "us-east-1"})
    with pytest.raises(InvalidInputError, match="aws_secret_access_key"):
        ObjectStore("s3://b/t", {"aws_access_key_id": "k", "aws_region": "us-east-1"})
    with pytest.raises(InvalidInputError, match="client_max_retries"):
        ObjectStore("s3://b/t", {"client_max_retries": "many", "aws_region": "us-east-1"})
    with pytest.raises(UnsupportedFeatureError, match="conditional"):
        ObjectStore("s3://b/t", {"aws_conditional_put": "disabled", "aws_region": "us-east-1"})
    with pytest.raises(InvalidInputError, match="s3://bucket"):
        ObjectStore("s3:///t", {})


def test_other_schemes_are_refused_clearly():
    for uri in ("hdfs://n/t", "ftp://h/t"):
        with pytest.raises(UnsupportedFeatureError, match="s3://"):
            lance_format.dataset(uri)


def test_option_aliases_case_and_environment_fallback():
    options = normalize_storage_options({"AWS_ENDPOINT": "localhost:9000", "Region": "eu-west-1",
                                         "access_key_id": "k", "secret_access_key": "s", "allow_http": True,
                                         "connect_timeout": "500ms", "timeout": "2 s", "client_max_retries": "4"})
    config = s3_config("b", options, environ={})
    assert config.endpoint == "https://localhost:9000" and config.region == "eu-west-1"
    assert (config.access_key_id, config.secret_access_key) == ("k", "s")
    assert config.connect_timeout == 0.5 and config.request_timeout == 2.0 and config.max_attempts == 5
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true", "AWS_DEFAULT_REGION": "ap-south-1"}
    from_env = s3_config("b", {}, environ=env)
    assert from_env.endpoint == "http://127.0.0.1:9" and from_env.region == "ap-south-1"
    assert s3_config("b", {"aws_region": "us-east-2"}, environ=env).region == "us-east-2"  # options win
    with pytest.raises(InvalidInputError, match="conflicts"):
        s3_config("b", {"aws_region": "a", "region": "b"}, environ={})


def test_local_tables_ignore_storage_options(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options={"aws_region": "x"})
    assert lance_format.dataset(uri, storage_options={"anything": "goes"}).count_rows() == 1


# -- Spark ------------------------------------------------------------------------------------------
def test_spark_write_and_read_on_s3(spark, s3, bucket):
    from lance_format import spark as lance_spark

    opts = s3.options()
    uri = f"s3://{bucket}/spark.lance"
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string").repartition(2)
    result = lance_spark.write_dataframe(df, uri, storage_options=opts, enable_stable_row_ids=True)
    assert result.version == 1 and result.rows == 20
    back = lance_spark.read_dataframe(spark, uri, storage_options=opts, filter="id >= 5").toPandas()
    assert sorted(back["id"].tolist()) == list(range(5, 20))
    assert lance.dataset(uri, storage_options=opts).count_rows() == 20

    # a merge: executors write deletion vectors and fragments on S3; the change feed reads them
    updates = spark.createDataFrame([(3, "three"), (50, "fifty")], "id long, name string")
    merged = lance_spark.merge_dataframe(updates, uri, on="id", storage_options=opts)
    assert (merged.version, merged.rows_updated, merged.rows_inserted) == (2, 1, 1)
    changes = lance_spark.read_changes(spark, uri, 1, 2, storage_options=opts).toPandas()
    assert sorted(changes["_change_type"]) == ["insert", "update_postimage", "update_preimage"]
    assert lance.dataset(uri, storage_options=opts).to_table(filter="id = 3").column("name").to_pylist() == ["three"]

    # the data source takes the same options as storage.<key>
    reader = spark.read.format("lance")
    small = spark.createDataFrame([(100 + i, "x") for i in range(4)], "id long, name string").repartition(4)
    writer = small.write.format("lance").mode("append")
    for key, value in opts.items():
        reader = reader.option(f"storage.{key}", value)
        writer = writer.option(f"storage.{key}", value)
    writer.save(uri)
    assert reader.load(uri).count() == 25
    # the tasks' small outputs were staged on S3 and coalesced into one file by the commit
    ds = lance.dataset(uri, storage_options=opts)
    assert ds.version == 3
    assert len(ds.get_fragments()) == len(lance.dataset(uri, version=2, storage_options=opts).get_fragments()) + 1
    from lance_format.io import object_store_for

    referenced = {d.path for v in (1, 2, 3) for f in lance.dataset(uri, version=v, storage_options=opts)
                  .get_fragments() for d in f.data_files()}
    assert {info.base_name for info in object_store_for(uri, opts).list_dir("data")} == referenced


# -- failure paths (refused conditional put, throttling, refused credentials) ------------------------
def test_a_refused_conditional_put_retries_at_the_next_version(s3, bucket, monkeypatch):
    from lance_format.io.s3 import S3Backend

    opts = s3.options()
    uri = f"s3://{bucket}/raced.lance"
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    original = S3Backend.put_if_absent
    refused: list[str] = []

    def another_writer_first(self, path, data, *, relative):
        if relative.startswith("_versions/") and not refused:
            # pylance commits version 2 between our listing and our PUT of version 2
            lance.write_dataset(pa.table({"id": [100]}), uri, mode="append", storage_options=opts)
            won = original(self, path, data, relative=relative)
            assert won is False  # the server answered our If-None-Match: * PUT with 412
            refused.append(relative)
            return won
        return original(self, path, data, relative=relative)

    monkeypatch.setattr(S3Backend, "put_if_absent", another_writer_first)
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append", storage_options=opts)
    assert refused and ds.version == 3
    assert sorted(lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist()) == [0, 1, 100]


def test_throttling_and_refused_credentials_on_s3(s3, bucket):
    from lance_format.errors import StorageAccessError, StorageThrottledError
    from tests.http_faults import FaultProxy

    uri = f"s3://{bucket}/faults.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=s3.options())
    proxy = FaultProxy(s3.endpoint)
    try:
        opts = {**s3.options(), "aws_endpoint": proxy.endpoint}
        proxy.throttle[:] = [(503, "SlowDown")] * 2  # the SDKs' bounded retries absorb these
        assert lance_format.dataset(uri, storage_options=opts).count_rows() == 2
        assert not proxy.throttle
        proxy.throttle[:] = [(503, "SlowDown")] * 20
        with pytest.raises(StorageThrottledError, match="S3") as info:
            lance_format.dataset(uri, storage_options={**opts, "client_max_retries": "1"})
        assert info.value.table == uri and 20 - len(proxy.throttle) <= 4
        proxy.throttle[:] = [(403, "ExpiredToken")] * 4
        with pytest.raises(StorageAccessError, match="S3 store refused") as info:
            lance_format.dataset(uri, storage_options=opts)
        assert info.value.table == uri
        proxy.throttle.clear()
        ds = lance_format.dataset(uri, storage_options=opts)
        proxy.throttle[:] = [(403, "ExpiredToken")] * 4  # the commit's conditional PUT (boto3)
        with pytest.raises(StorageAccessError):
            ds.delete("id = 1")
    finally:
        proxy.stop()
