"""Tables on GCS (``gs://``) against gcp-storage-emulator, started by the suite on 127.0.0.1:
every write path, create-only commits (``ifGenerationMatch=0``) including a refused one,
concurrent committers (ours and pylance's), pylance both ways, option validation, and the
failure paths (throttling, expired credentials)."""

from __future__ import annotations

import threading

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, StorageAccessError, StorageThrottledError, UnsupportedFeatureError
from lance_format.io import ObjectStore
from lance_format.io.gcs import GcsBackend, gcs_config
from lance_format.io.storage_options import normalize_storage_options
from tests import storage_contract as contract
from tests.compat import SYSTEM, assert_tables_equal
from tests.gcs_support import EXPIRED_TOKEN, start_server


@pytest.fixture(scope="module")
def gcs():
    server = start_server()
    yield server
    server.server.stop()


@pytest.fixture
def bucket(gcs):
    gcs.faults.throttle.clear()
    return gcs.new_bucket()


def _same_as_pylance(uri: str, opts: dict, version: int) -> None:
    ours = lance_format.dataset(uri, version=version, storage_options=opts)
    theirs = lance.dataset(uri, version=version, storage_options=opts)
    assert ours.schema.equals(theirs.schema, check_metadata=True)
    cols = ours.schema.names + SYSTEM
    assert_tables_equal(ours.to_table(columns=cols), theirs.to_table(columns=cols), f"gcs version {version}")


def test_every_write_path_matches_local_and_pylance_reads_it(gcs, bucket, tmp_path):
    opts = gcs.options()
    uri = f"gs://{bucket}/tables/people.lance"
    latest = contract.mutate(uri, opts)
    assert lance_format.dataset(uri, storage_options=opts).versions() == \
        lance.dataset(uri, storage_options=opts).versions()
    for version in range(1, latest + 1):
        _same_as_pylance(uri, opts, version)
    keys = gcs.keys(bucket, "tables/people.lance/")
    assert keys and not [k for k in keys if k.endswith("/") or "/.tmp" in k or k.endswith("hint.json")]


def test_history_cleanup_and_tags_match_local(gcs, bucket, tmp_path):
    opts = gcs.options()
    contract.check_history_matches_local(f"gs://{bucket}/h.lance", opts, str(tmp_path / "h.lance"))
    contract.check_tags(f"gs://{bucket}/tagged.lance", opts)
    assert lance.dataset(f"gs://{bucket}/tagged.lance", storage_options=opts).tags.list()["first"]["version"] == 1


def test_we_read_and_extend_a_table_pylance_wrote(gcs, bucket):
    opts = gcs.options()
    uri = f"gs://{bucket}/theirs.lance"
    lance.write_dataset(pa.table({"id": [1, 2], "v": [0.5, 1.5]}), uri, storage_options=opts)
    lance.write_dataset(pa.table({"id": [3], "v": [2.5]}), uri, mode="append", storage_options=opts)
    lance.dataset(uri, storage_options=opts).delete("id = 1")
    for version in (1, 2, 3):
        _same_as_pylance(uri, opts, version)
    lance_format.dataset(uri, storage_options=opts).update({"v": "v * 2"}, where="id = 3")
    assert lance.dataset(uri, storage_options=opts).to_table().sort_by("id").to_pydict() == {
        "id": [2, 3], "v": [1.5, 5.0]}


def test_create_only_puts_have_one_winner(gcs, bucket):
    contract.check_racing_puts(ObjectStore(f"gs://{bucket}/t", gcs.options()))
    contract.check_pickles(ObjectStore(f"gs://{bucket}/p", gcs.options()))


def test_a_refused_conditional_put_retries_at_the_next_version(gcs, bucket, monkeypatch):
    opts = gcs.options()
    uri = f"gs://{bucket}/raced.lance"
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    original = GcsBackend.put_if_absent
    refused: list[str] = []

    def another_writer_first(self, path, data, *, relative):
        if relative.startswith("_versions/") and not refused:
            # pylance commits version 2 between our listing and our upload of version 2
            lance.write_dataset(pa.table({"id": [100]}), uri, mode="append", storage_options=opts)
            won = original(self, path, data, relative=relative)
            assert won is False  # the emulator refused our create-only upload with 412
            refused.append(relative)
            return won
        return original(self, path, data, relative=relative)

    monkeypatch.setattr(GcsBackend, "put_if_absent", another_writer_first)
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append", storage_options=opts)
    assert refused and ds.version == 3
    assert sorted(lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist()) == [0, 1, 100]


def test_concurrent_committers_ours_and_pylance(gcs, bucket):
    opts = gcs.options()

    def pylance_ids(uri: str) -> list[int]:
        return sorted(lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist())

    contract.check_concurrent_committers(f"gs://{bucket}/c.lance", opts, writers=3, read=pylance_ids)

    uri = f"gs://{bucket}/mixed.lance"
    lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def run(fn) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    writers = [
        lambda: lance_format.write_dataset(pa.table({"id": [1]}), uri, mode="append", storage_options=opts),
        lambda: lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts),
        lambda: lance.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts),
    ]
    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pylance_ids(uri) == [0, 1, 2, 3]
    assert lance_format.dataset(uri, storage_options=opts).version == 4


# -- failure paths ------------------------------------------------------------------------------
def test_throttling_is_retried_with_a_bound(gcs, bucket):
    opts = gcs.options()
    uri = f"gs://{bucket}/throttled.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    gcs.faults.throttle[:] = [429, 503, 429]
    assert lance_format.dataset(uri, storage_options=opts).count_rows() == 2  # retried through
    assert not gcs.faults.throttle
    gcs.faults.throttle[:] = [429, 503]
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append", storage_options=opts)
    gcs.faults.throttle[:] = [503] * 20
    with pytest.raises(StorageThrottledError, match="GCS") as info:
        lance_format.dataset(uri, storage_options={**opts, "client_max_retries": "2"})
    assert info.value.table == uri
    # bounded: 3 attempts of ours (the HTTP stack may resend a request once on its own)
    assert 3 <= 20 - len(gcs.faults.throttle) <= 6
    gcs.faults.throttle.clear()
    assert lance_format.dataset(uri, storage_options=opts).count_rows() == 3


def test_expired_credentials_raise_a_typed_error(gcs, bucket):
    uri = f"gs://{bucket}/creds.lance"
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=gcs.options())
    expired = {"google_base_url": gcs.endpoint, "allow_http": "true", "google_storage_token": EXPIRED_TOKEN}
    with pytest.raises(StorageAccessError, match="GCS store refused") as info:
        lance_format.dataset(uri, storage_options=expired)
    assert info.value.table == uri and isinstance(info.value, PermissionError)
    with pytest.raises(StorageAccessError):
        lance_format.write_dataset(pa.table({"id": [2]}), f"gs://{bucket}/new.lance", storage_options=expired)


def test_gcs_options_are_validated():
    with pytest.raises(InvalidInputError, match="google_service_acount"):
        ObjectStore("gs://b/t", {"google_service_acount": "x"})
    with pytest.raises(UnsupportedFeatureError, match="google_bucket"):
        ObjectStore("gs://b/t", {"google_bucket": "other"})
    with pytest.raises(UnsupportedFeatureError, match="google_user_agent"):
        ObjectStore("gs://b/t", {"google_user_agent": "x"})
    with pytest.raises(InvalidInputError, match="allow_http"):
        ObjectStore("gs://b/t", {"google_base_url": "http://127.0.0.1:1"})
    with pytest.raises(InvalidInputError, match="JSON"):
        ObjectStore("gs://b/t", {"google_service_account_key": "not json"})
    with pytest.raises(InvalidInputError, match="conflicts"):
        ObjectStore("gs://b/t", {"google_storage_token": "a", "bearer_token": "b"})
    with pytest.raises(InvalidInputError, match="gs://bucket"):
        ObjectStore("gs:///t", {})
    config = gcs_config("b", normalize_storage_options({"Service_Account_Key": '{"gcs_base_url": "http://h:1", '
                                                       '"disable_oauth": true}', "google_allow_http": True,
                                                       "google_timeout": "2s", "client_max_retries": "4"}),
                        environ={})
    assert config.base_url == "http://h:1" and config.credentials == ("anonymous", "")
    assert config.client.request_timeout == 2.0 and config.client.max_retries == 4
    from_env = gcs_config("b", {}, environ={"GOOGLE_STORAGE_TOKEN": "tok"})
    assert from_env.credentials == ("token", "tok") and from_env.base_url is None
    assert gcs_config("b", {"google_storage_token": "mine"}, environ={"GOOGLE_STORAGE_TOKEN": "env"}).credentials == \
        ("token", "mine")


def test_spark_write_and_read_on_gcs(spark, gcs, bucket):
    from lance_format import spark as lance_spark

    opts = gcs.options()
    uri = f"gs://{bucket}/spark.lance"
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string").repartition(2)
    result = lance_spark.write_dataframe(df, uri, storage_options=opts)
    assert result.version == 1 and result.rows == 20
    back = lance_spark.read_dataframe(spark, uri, storage_options=opts, filter="id >= 5").toPandas()
    assert sorted(back["id"].tolist()) == list(range(5, 20))
    assert lance.dataset(uri, storage_options=opts).count_rows() == 20


def test_latest_of_many_versions_with_one_small_listing(gcs, bucket):
    from lance_format.table.naming import list_versions

    opts = gcs.options()
    uri = f"gs://{bucket}/versions.lance"
    contract.many_versions(uri, opts, 1500)
    gcs.faults.listings.clear()
    ds = lance_format.dataset(uri, storage_options=opts)
    assert ds.version == 1500 and ds.count_rows() == 1
    # one page of 100 names (a full listing took 2 requests of 1000 names, 15 at 15k versions)
    assert [q.get("maxResults") for q in gcs.faults.listings] == ["100"], gcs.faults.listings
    assert gcs.faults.listings[0]["prefix"] == "versions.lance/_versions/"
    gcs.faults.listings.clear()
    assert lance_format.dataset(uri, version=1450, storage_options=opts).version == 1450
    assert len(gcs.faults.listings) <= 2
    gcs.faults.listings.clear()
    ds = lance_format.write_dataset(pa.table({"id": [2]}), ds, mode="append")
    assert ds.version == 1501 and lance.dataset(uri, storage_options=opts).version == 1501
    assert sorted(list_versions(ObjectStore(uri, opts)).versions) == list(range(1, 1502))  # the full listing pages
    # V1 names do not sort by version: listed in full, page after page
    v1 = f"gs://{bucket}/v1.lance"
    contract.many_versions(v1, opts, 250, v2_names=False)
    gcs.faults.listings.clear()
    assert lance_format.dataset(v1, storage_options=opts).version == 250
    assert lance.dataset(v1, storage_options=opts).version == 250
    assert [q.get("maxResults") for q in gcs.faults.listings] == ["100", "1000"]
    # the option shared with s3+ddb:// tables is ignored here too
    assert lance_format.dataset(v1, storage_options={**opts, "dynamodb_endpoint": "x"}).version == 250


def test_a_table_at_the_bucket_root(gcs, bucket):
    opts = gcs.options()
    uri = f"gs://{bucket}"
    assert not ObjectStore(uri, opts).list_files("_versions")
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=opts)
    assert ObjectStore(uri, opts).list_files("_versions")
    assert lance.dataset(uri, storage_options=opts).count_rows() == 2
    assert lance_format.dataset(uri + "/", storage_options=opts).count_rows() == 2
