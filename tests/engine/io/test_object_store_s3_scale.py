"""S3 at scale (moto's real S3 API): coalesced parallel ranged reads, takes that batch their
reads, ``_versions/`` listings that stay short with many versions, batched deletes, credentials
refreshed by a provider (real key rotation with moto's IAM auth), and throttling on every path."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import CorruptFileError, StorageAccessError, StorageThrottledError
from lance_format.file.plans import plans_for_schema, structural_plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.file.writer import LanceFileWriter
from lance_format.io import ObjectStore
from lance_format.io.ranges import ReadPolicy, coalesce_ranges, read_ranges
from lance_format.io.s3 import S3Objects
from lance_format.schema import LanceSchema
from lance_format.table.manifest import encode_manifest, read_manifest
from lance_format.table.naming import U64_MAX, list_versions
from lance_format.table.version_discovery import latest_version
from tests.http_faults import FaultProxy
from tests.s3_support import ACCESS_KEY, REGION, SECRET_KEY


@pytest.fixture
def s3_calls(monkeypatch):
    """The boto3 operations this engine sends (list_objects_v2, delete_objects, ...), in order."""
    calls: list[str] = []
    original = S3Objects.call

    def counting(self, what, operation, **kwargs):
        calls.append(operation)
        return original(self, what, operation, **kwargs)

    monkeypatch.setattr(S3Objects, "call", counting)
    return calls


# -- coalescing -------------------------------------------------------------------------------------
def test_coalesced_ranges_split_back_exactly():
    data = bytes(np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8))
    reads: list[tuple[int, int]] = []

    def read_at(offset, length):
        reads.append((offset, length))
        return data[offset:offset + length]

    # out of order, overlapping, repeated, empty, touching the end of the file
    ranges = [(5000, 100), (10, 20), (4990, 50), (10, 20), (700_000, 0), (len(data) - 7, 7), (20, 100)]
    got = read_ranges(read_at, ranges, ReadPolicy(gap=1024, max_size=1 << 20))
    assert [bytes(b) for b in got] == [data[o:o + n] for o, n in ranges]
    # three requests: [10, 120), [4990, 5100), and the tail (the empty range rides with nothing near)
    assert sorted(reads) == [(10, 110), (4990, 110), (700_000, 0), (len(data) - 7, 7)]


def test_coalescing_respects_the_gap_and_the_size_cap():
    merged = coalesce_ranges([(0, 10), (20, 10), (1000, 10)], gap=10, max_size=100)
    assert [(m.start, m.end, m.members) for m in merged] == [(0, 30, (0, 1)), (1000, 1010, (2,))]
    # a huge range is never merged with its neighbours, and merging stops at max_size
    huge = coalesce_ranges([(0, 10), (10, 5000), (5010, 10)], gap=1 << 20, max_size=1000)
    assert [(m.start, m.end) for m in huge] == [(0, 10), (10, 5010), (5010, 5020)]
    capped = coalesce_ranges([(i * 100, 100) for i in range(25)], gap=0, max_size=1000)
    assert [(m.start, m.end) for m in capped] == [(0, 1000), (1000, 2000), (2000, 2500)]
    assert coalesce_ranges([]) == []


def test_short_reads_are_corruption():
    with pytest.raises(CorruptFileError, match="short read"):
        read_ranges(lambda o, n: b"x" * (n - 1), [(0, 10)], path="f.lance")


def test_requests_run_in_parallel():
    active, peak, lock = [0], [0], threading.Lock()

    def slow_read(offset, length):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return bytes(length)

    ranges = [(i * (10 << 20), 8) for i in range(8)]  # too far apart to merge
    started = time.perf_counter()
    assert [len(b) for b in read_ranges(slow_read, ranges)] == [8] * 8
    assert peak[0] > 1 and time.perf_counter() - started < 8 * 0.05
    peak[0] = 0
    read_ranges(slow_read, ranges, ReadPolicy(parallelism=1))
    assert peak[0] == 1


def test_store_read_ranges_on_s3_and_local_agree(s3, bucket, tmp_path):
    payload = bytes(np.random.default_rng(1).integers(0, 256, 3 << 20, dtype=np.uint8))
    s3.client().put_object(Bucket=bucket, Key="t/blob.bin", Body=payload)
    (tmp_path / "blob.bin").write_bytes(payload)
    proxy = FaultProxy(s3.endpoint)
    try:
        remote = ObjectStore(f"s3://{bucket}/t", {**s3.options(), "aws_endpoint": proxy.endpoint})
        local = ObjectStore(str(tmp_path))
        ranges = [(i * 40_000, 3000) for i in range(50)] + [((3 << 20) - 10, 10)]
        before = proxy.forwarded
        got = remote.read_ranges("blob.bin", ranges)
        requests = proxy.forwarded - before
        assert [bytes(b) for b in got] == [bytes(b) for b in local.read_ranges("blob.bin", ranges)]
        assert [bytes(b) for b in got] == [payload[o:o + n] for o, n in ranges]
        assert requests <= 4  # a HEAD and ~2 MiB-spanning coalesced GETs instead of 51 GETs
        with pytest.raises(CorruptFileError):
            remote.read_ranges("blob.bin", [(len(payload) - 5, 10)])
        with pytest.raises(CorruptFileError):
            local.read_ranges("blob.bin", [(len(payload) - 5, 10)])
    finally:
        proxy.stop()


# -- takes --------------------------------------------------------------------------------------------
def test_take_over_s3_returns_the_rows_of_local_with_few_requests(s3, bucket, tmp_path):
    rows = 1_000_000  # pages of several MiB: 200 scattered rows touch ~800 mini-block chunks
    ids = np.arange(rows, dtype=np.int64)
    offsets = pa.array(np.arange(0, 2 * rows + 1, 2, dtype=np.int32))
    data = pa.table({"id": ids, "value": ids * 0.5,
                     "name": pc.binary_join_element_wise("n", pa.array(ids % 977).cast(pa.string()), ""),
                     "tags": pa.ListArray.from_arrays(offsets, pa.array(np.arange(2 * rows, dtype=np.int64)))})
    uri, local = f"s3://{bucket}/take.lance", str(tmp_path / "take.lance")
    lance.write_dataset(data, uri, storage_options=s3.options(), data_storage_version="2.2")
    lance.write_dataset(data, local, data_storage_version="2.2")
    indices = np.sort(np.random.default_rng(3).choice(rows, 200, replace=False))
    proxy = FaultProxy(s3.endpoint)
    try:
        opts = {**s3.options(), "aws_endpoint": proxy.endpoint}
        ds = lance_format.dataset(uri, storage_options=opts)
        before = proxy.forwarded
        taken = ds.take(indices)
        requests = proxy.forwarded - before
    finally:
        proxy.stop()
    assert taken.equals(lance_format.dataset(local).take(indices))
    assert taken.equals(lance.dataset(uri, storage_options=s3.options()).take(indices))
    assert taken.column("id").to_numpy().tolist() == indices.tolist()
    # one ranged GET per chunk made ~520 requests; coalesced, a dozen
    assert requests < 40, requests


def _take_table(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    offsets = pa.array(np.arange(0, 2 * rows + 1, 2, dtype=np.int32))
    return pa.table({"id": ids, "value": ids * 0.5,
                     "name": pc.binary_join_element_wise("n", pa.array(ids % 977).cast(pa.string()), ""),
                     "tags": pa.ListArray.from_arrays(offsets, pa.array(np.arange(2 * rows, dtype=np.int64))),
                     "point": pa.StructArray.from_arrays([ids % 7, ids.astype(np.float32)], ["x", "y"])})


def test_takes_from_legacy_files_batch_their_reads(s3, bucket, tmp_path):
    # the reads of every (batch, field) go out in rounds, one per level of indirection: a take of
    # 200 rows from 390 batches made 1259 requests, now 5 (3 of them open the file)
    data = _take_table(200_000)
    uri, local = f"s3://{bucket}/take-legacy.lance", str(tmp_path / "take.lance")
    options = dict(data_storage_version="legacy", max_rows_per_group=512)  # a batch per row of the take
    lance.write_dataset(data, uri, storage_options=s3.options(), **options)
    lance.write_dataset(data, local, **options)
    indices = np.sort(np.random.default_rng(4).choice(len(data), 200, replace=False))
    proxy = FaultProxy(s3.endpoint)
    try:
        ds = lance_format.dataset(uri, storage_options={**s3.options(), "aws_endpoint": proxy.endpoint})
        before = proxy.forwarded
        taken = ds.take(indices)
        requests = proxy.forwarded - before
        shuffled = ds.take(indices[::-1].copy())
        before = proxy.forwarded
        scanned = ds.to_table()
        scan_requests = proxy.forwarded - before
    finally:
        proxy.stop()
    assert taken.equals(lance_format.dataset(local).take(indices))
    assert taken.equals(lance.dataset(uri, storage_options=s3.options()).take(indices))
    assert shuffled.equals(taken.take(pa.array(np.arange(len(indices))[::-1])))
    assert scanned.equals(lance.dataset(local).to_table())
    assert requests <= 8, requests
    assert scan_requests < 40, scan_requests


def test_takes_from_2_0_files_fetch_their_pages_in_one_batch(s3, bucket, tmp_path):
    # the pages a read touches are fetched ahead as one coalesced batch per column: with pages of
    # 4 KiB, a take of 200 scattered rows made 1404 requests (a GET per page, some twice), now 7;
    # a range of 89k rows 1597, now 7
    data = _take_table(100_000)
    schema = LanceSchema.from_arrow(data.schema)
    remote_store = ObjectStore(f"s3://{bucket}/files", s3.options())
    local_store = ObjectStore(str(tmp_path))
    for store in (remote_store, local_store):
        writer = LanceFileWriter(store, "data/f.lance", schema, version="2.0", max_page_bytes=4096)
        for batch in data.to_batches(max_chunksize=10_000):
            writer.write_batch(batch)
        writer.finish()
    indices = np.sort(np.random.default_rng(5).choice(len(data), 200, replace=False))
    proxy = FaultProxy(s3.endpoint)
    try:
        store = ObjectStore(f"s3://{bucket}/files", {**s3.options(), "aws_endpoint": proxy.endpoint})
        with LanceFileReader(store, "data/f.lance") as reader:
            plans = plans_for(reader)
            assert reader.metadata.columns[0].pages.__len__() > 100  # many small pages
            before = proxy.forwarded
            taken = reader.take(plans, indices)
            requests = proxy.forwarded - before
            shuffled = reader.take(plans, indices[::-1].copy())
            before = proxy.forwarded
            ranged = reader.read_range(plans, 1000, 90_000)
            range_requests = proxy.forwarded - before
    finally:
        proxy.stop()
    with LanceFileReader(local_store, "data/f.lance") as reader:
        plans = plans_for(reader)
        expected = reader.take(plans, indices)
        expected_range = reader.read_range(plans, 1000, 90_000)
    assert [a.equals(b) for a, b in zip(taken, expected)] == [True] * len(plans)
    assert [a.equals(b) for a, b in zip(ranged, expected_range)] == [True] * len(plans)
    assert [a.equals(b.take(pa.array(np.arange(len(indices))[::-1]))) for a, b in zip(shuffled, taken)] == \
        [True] * len(plans)
    assert pa.table(taken, names=data.column_names).equals(data.take(indices))
    assert requests < 40, requests
    assert range_requests < 40, range_requests


# -- listings ------------------------------------------------------------------------------------------
def _many_versions(s3, bucket: str, count: int) -> str:
    """A table with ``count`` versions: one real commit, its manifest re-encoded for the rest."""
    uri = f"s3://{bucket}/versions.lance"
    opts = s3.options()
    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    base = read_manifest(ObjectStore(uri, opts), f"_versions/{U64_MAX - 1:020d}.manifest")
    client = s3.client()

    def put(version: int) -> None:
        manifest = type(base.manifest)()
        manifest.CopyFrom(base.manifest)
        manifest.version = version
        client.put_object(Bucket=bucket, Key=f"versions.lance/_versions/{U64_MAX - version:020d}.manifest",
                          Body=encode_manifest(manifest, base.transaction, base.index_section))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(2, count + 1)))
    return uri


def test_latest_of_3000_versions_with_one_small_listing(s3, bucket, s3_calls):
    uri = _many_versions(s3, bucket, 3000)
    opts = s3.options()
    s3_calls.clear()
    ds = lance_format.dataset(uri, storage_options=opts)
    assert ds.version == 3000 and ds.count_rows() == 1
    assert s3_calls.count("list_objects_v2") == 1
    s3_calls.clear()
    assert latest_version(uri, storage_options=opts) == 3000
    assert s3_calls.count("list_objects_v2") == 1
    s3_calls.clear()
    assert lance_format.dataset(uri, version=2950, storage_options=opts).version == 2950
    assert s3_calls.count("list_objects_v2") <= 2  # the latest, then back to 2950 (within the first page)
    s3_calls.clear()
    ds = lance_format.write_dataset(pa.table({"id": [2]}), ds, mode="append")  # lists from its read version on
    assert ds.version == 3001 and s3_calls.count("list_objects_v2") <= 2
    assert lance.dataset(uri, storage_options=opts).version == 3001
    s3_calls.clear()
    full = list_versions(ObjectStore(uri, opts))  # everything, when asked for everything
    assert sorted(full.versions) == list(range(1, 3002))
    with pytest.raises(Exception, match="does not exist"):
        lance_format.dataset(uri, version=3005, storage_options=opts)


# -- batched deletes -----------------------------------------------------------------------------------
def test_deletes_go_out_in_batches_of_1000(s3, bucket, s3_calls):
    client = s3.client()
    keys = [f"t/data/{i:05d}.bin" for i in range(2001)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=bucket, Key=k, Body=b"x"), keys))
    store = ObjectStore(f"s3://{bucket}/t", s3.options())
    s3_calls.clear()
    assert store.delete_many([k[2:] for k in keys] + ["data/absent.bin"]) == []
    assert s3_calls == ["delete_objects"] * 3
    assert s3.keys(bucket, "t/") == []


def test_cleanup_on_s3_deletes_in_batches(s3, bucket, s3_calls):
    uri, opts = f"s3://{bucket}/clean.lance", s3.options()
    ds = lance_format.write_dataset(pa.table({"id": [0]}), uri, storage_options=opts)
    for i in range(1, 12):
        ds = lance_format.write_dataset(pa.table({"id": [i]}), uri, mode="overwrite", storage_options=opts)
    s3_calls.clear()
    stats = ds.cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == 11 and stats.data_files_removed == 11 and stats.failed_deletes == 0
    assert s3_calls.count("delete_objects") == 2  # old manifests first, then the files only they used
    assert "delete_object" not in s3_calls
    assert lance.dataset(uri, storage_options=opts).to_table().column("id").to_pylist() == [11]
    assert [v["version"] for v in lance.dataset(uri, storage_options=opts).versions()] == [12]


# -- refreshing credentials -----------------------------------------------------------------------------
def plans_for(reader: LanceFileReader):
    schema = reader.lance_schema()
    return structural_plans_for_schema(schema) if reader.structural else plans_for_schema(schema)


def _moto_auth(endpoint: str, count: str) -> None:
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=count.encode(), method="POST",
                                     headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request).read()


def test_credentials_refresh_when_the_key_is_rotated(s3, bucket):
    import boto3

    iam = boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key=SECRET_KEY, region_name=REGION)
    user = f"writer-{bucket}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    first, second = (iam.create_access_key(UserName=user)["AccessKey"] for _ in range(2))
    current = [first]
    calls: list[str] = []

    def provider():
        key = current[0]
        calls.append(key["AccessKeyId"])
        return {"aws_access_key_id": key["AccessKeyId"], "aws_secret_access_key": key["SecretAccessKey"]}

    plain = {k: v for k, v in s3.options().items() if "access" not in k}
    uri = f"s3://{bucket}/rotated.lance"
    _moto_auth(s3.endpoint, "0")  # from now on moto checks every request's key and signature
    try:
        ds = lance_format.write_dataset(pa.table({"id": [1, 2]}), uri,
                                        storage_options={**plain, "credential_provider": provider})
        assert calls == [first["AccessKeyId"]]
        data_file = ds.get_fragments()[0].data_files()[0].path
        reader = LanceFileReader(ds.object_store, f"data/{data_file}")  # opened with the first key
        stale = lance_format.dataset(uri, storage_options={**plain, "aws_access_key_id": first["AccessKeyId"],
                                                           "aws_secret_access_key": first["SecretAccessKey"]})
        # rotation: the provider hands out the second key, the first one is deleted
        current[0] = second
        boto3.client("iam", endpoint_url=s3.endpoint, aws_access_key_id=second["AccessKeyId"],
                     aws_secret_access_key=second["SecretAccessKey"], region_name=REGION,
                     ).delete_access_key(UserName=user, AccessKeyId=first["AccessKeyId"])
        # refused with the old key, asked again, retried
        ds = lance_format.write_dataset(pa.table({"id": [3]}), ds, mode="append")
        assert calls == [first["AccessKeyId"], second["AccessKeyId"]]
        assert sorted(ds.to_table().column("id").to_pylist()) == [1, 2, 3]
        with pytest.raises(StorageAccessError):  # without a provider the old key stays refused
            stale.to_table()
        # a file opened before the rotation is reopened with the new key
        assert reader.read_range(plans_for(reader), 0, 2)[0].to_pylist() == [1, 2]
        # stores opened from this one (branches, base paths) keep the provider
        assert ds.object_store.sibling(f"s3://{bucket}/other")._credential_provider is provider
    finally:
        _moto_auth(s3.endpoint, "inf")


def test_credentials_that_expire_soon_are_refreshed_before_use(s3, bucket):
    calls = []

    def provider():
        calls.append(1)
        # expires within the refresh margin: every use asks again
        return {"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY,
                "expires_at_millis": str(int(time.time() * 1000) + 30_000)}

    plain = {k: v for k, v in s3.options().items() if "access" not in k}
    ds = lance_format.write_dataset(pa.table({"id": [1]}), f"s3://{bucket}/expiring.lance",
                                    storage_options={**plain, "credential_provider": provider})
    assert ds.count_rows() == 1 and len(calls) > 2
    with pytest.raises(Exception, match="credential_provider"):
        ObjectStore(f"s3://{bucket}/x", {**plain, "credential_provider": "not callable"})
    with pytest.raises(Exception, match="credential provider"):
        ObjectStore(f"s3://{bucket}/x", {**plain, "credential_provider": lambda: {"aws_region": "x"}})


# -- throttling -----------------------------------------------------------------------------------------
def test_throttled_listings_and_deletes_are_retried_then_typed(s3, bucket):
    uri = f"s3://{bucket}/throttled.lance"
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri, storage_options=s3.options())
    s3.client().put_object(Bucket=bucket, Key="throttled.lance/junk/a.bin", Body=b"x")
    proxy = FaultProxy(s3.endpoint)
    try:
        opts = {**s3.options(), "aws_endpoint": proxy.endpoint}
        store = ObjectStore(uri, opts)
        proxy.throttle[:] = [(503, "SlowDown"), (429, "TooManyRequests")]  # the listing, retried
        assert lance_format.dataset(store).count_rows() == 2 and not proxy.throttle
        proxy.throttle[:] = [(503, "SlowDown")] * 2  # DeleteObjects, retried
        assert store.delete_many(["junk/a.bin"]) == [] and not proxy.throttle
        assert s3.keys(bucket, "throttled.lance/junk/") == []
        proxy.throttle[:] = [(503, "SlowDown")]  # the commit's conditional PUT, retried
        assert store.put_if_not_exists("junk/c.bin", b"c") and not proxy.throttle
        proxy.throttle[:] = [(503, "SlowDown")] * 20
        tight = ObjectStore(uri, {**opts, "client_max_retries": "1"})
        with pytest.raises(StorageThrottledError, match="S3"):
            lance_format.dataset(tight)
        with pytest.raises(StorageThrottledError):
            tight.delete_many(["junk/b.bin"])
        with pytest.raises(StorageThrottledError):
            tight.read_bytes("_versions/" + f"{U64_MAX - 1:020d}.manifest")
        with pytest.raises(StorageThrottledError):
            tight.put_if_not_exists("junk/d.bin", b"d")
    finally:
        proxy.stop()
