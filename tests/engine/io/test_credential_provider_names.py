"""A refreshing ``credential_provider`` named by a string (``"package.module:factory"``), so it
reaches the processes that only get strings: Spark's Python workers (task options) and Dagster
resources configured from YAML. Tested on moto's S3 API with its IAM checks on, with a key that
is rotated (the old one deleted) between a Spark write and a Spark read."""

from __future__ import annotations

import json
import os
import pickle

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, StorageAccessError
from lance_format.io import ObjectStore
from lance_format.io.credentials import named_credential_provider
from tests.s3_support import delete_access_key, iam_access_keys, moto_auth

FACTORY = "tests.credential_factories:key_file_provider"


def _plain(s3) -> dict[str, str]:
    return {k: v for k, v in s3.options().items() if "access" not in k}


def _log(path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [(int(pid), key) for pid, key in (line.split() for line in path.read_text().splitlines())]


def test_a_named_provider_is_made_in_each_process_and_travels_as_strings(s3, bucket, tmp_path):
    key_file, log = tmp_path / "key.json", tmp_path / "calls.log"
    key_file.write_text(json.dumps({"aws_access_key_id": "testing-key", "aws_secret_access_key": "testing-secret"}))
    args = json.dumps({"key_file": str(key_file), "log_file": str(log)})
    opts = {**_plain(s3), "Credential_Provider": FACTORY, "credential_provider_args": args}
    uri = f"s3://{bucket}/named.lance"
    ds = lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    assert ds.count_rows() == 2 and len(_log(log)) > 2  # short-lived: asked again before each use
    store = ds.object_store
    assert store.storage_options["credential_provider"] == FACTORY  # strings: they go where options go
    assert store.storage_options["credential_provider_args"] == args
    assert all(isinstance(v, str) for v in store.storage_options.values())
    again = pickle.loads(pickle.dumps(store))  # what a Spark task gets: re-made from the strings
    assert again._credential_provider is store._credential_provider  # one provider per process
    assert again.sibling(f"s3://{bucket}/other")._credential_provider is store._credential_provider
    assert lance_format.dataset(uri, storage_options=store.storage_options).count_rows() == 2
    # arguments as a Python dict mean the same as their JSON
    same = ObjectStore(uri, {**_plain(s3), "credential_provider": FACTORY,
                             "credential_provider_args": {"key_file": str(key_file), "log_file": str(log)}})
    assert same._credential_provider is store._credential_provider


def test_bad_provider_names_are_refused_clearly(s3, bucket):
    uri = f"s3://{bucket}/bad.lance"
    plain = _plain(s3)
    for name, args, message in [
        ("tests.credential_factories", None, "package.module:factory"),
        ("tests.no_such_module:f", None, "cannot import"),
        ("tests.credential_factories:nothing", None, "cannot import"),
        ("tests.credential_factories:not_a_factory", None, "not a provider callable"),
        (FACTORY, '{"wrong": 1}', "does not take the arguments"),
    ]:
        options = {**plain, "credential_provider": name}
        if args is not None:
            options["credential_provider_args"] = args
        with pytest.raises(InvalidInputError, match=message):
            ObjectStore(uri, options)
    with pytest.raises(InvalidInputError, match="needs 'credential_provider'"):
        ObjectStore(uri, {**plain, "credential_provider_args": "{}"})
    with pytest.raises(InvalidInputError, match="not with a callable"):
        ObjectStore(uri, {**plain, "credential_provider": lambda: {}, "credential_provider_args": "{}"})


def test_factory_arguments_json_or_plain_string(tmp_path):
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps({"aws_access_key_id": "k", "aws_secret_access_key": "s"}))
    for args in (str(key_file), json.dumps([str(key_file)]), json.dumps({"key_file": str(key_file)})):
        provider = named_credential_provider(FACTORY, args)
        assert provider()["aws_access_key_id"] == "k"
    assert named_credential_provider(FACTORY, str(key_file)) is named_credential_provider(FACTORY, str(key_file))


def test_spark_workers_refresh_credentials_named_by_a_string(spark, s3, bucket, tmp_path):
    from lance_format import spark as lance_spark

    user = f"spark-{bucket}"
    first, second = iam_access_keys(s3, user, 2)
    key_file, log = tmp_path / "key.json", tmp_path / "calls.log"
    key_file.write_text(json.dumps(first))
    opts = {**_plain(s3), "credential_provider": FACTORY,
            "credential_provider_args": json.dumps({"key_file": str(key_file), "log_file": str(log)})}
    uri = f"s3://{bucket}/spark.lance"
    moto_auth(s3.endpoint, True)  # from now on only the IAM user's current keys pass
    try:
        df = spark.createDataFrame([(i, f"n{i}") for i in range(40)], "id long, name string").repartition(2)
        result = lance_spark.write_dataframe(df, uri, storage_options=opts)
        assert result.rows == 40 and result.fragments_before_coalescing == 2  # two tasks wrote
        workers = {pid for pid, _ in _log(log)} - {os.getpid()}
        assert workers, "the Python workers made no provider of their own"
        # rotation: the file now holds the second key, the first is deleted
        key_file.write_text(json.dumps(second))
        delete_access_key(s3, user, first, using=second)
        log.unlink()
        with pytest.raises(StorageAccessError):
            lance_format.dataset(uri, storage_options={**_plain(s3), **first}).count_rows()
        back = lance_spark.read_dataframe(spark, uri, storage_options=opts, filter="id >= 10").toPandas()
        assert sorted(back["id"].tolist()) == list(range(10, 40))
        calls = _log(log)
        assert {key for _, key in calls} == {second["aws_access_key_id"]}
        assert {pid for pid, _ in calls} - {os.getpid()}, "no worker asked the provider after the rotation"
        # the DataFrame API takes it as plain string options too
        appended = spark.createDataFrame([(100, "x")], "id long, name string").write.format("lance").mode("append")
        for key, value in opts.items():
            appended = appended.option(f"storage.{key}", value)
        appended.save(uri)
        reader = spark.read.format("lance")
        for key, value in opts.items():
            reader = reader.option(f"storage.{key}", value)
        assert reader.load(uri).count() == 41
        assert lance.dataset(uri, storage_options={**_plain(s3), **second}).count_rows() == 41
    finally:
        moto_auth(s3.endpoint, False)
