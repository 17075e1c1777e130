"""Checks every storage backend must pass, shared by the per-backend test modules: the same
table history as on a local disk, one winner among racing put-if-absent calls, concurrent
committers that lose no update, tags, cleanup, and a store that survives pickling."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable
from datetime import timedelta

import pyarrow as pa

import lance_format
from lance_format.errors import CommitConflictError, TagError
from lance_format.io import ObjectStore


def sorted_table(table: pa.Table) -> pa.Table:
    return table.sort_by([("id", "ascending")])


def mutate(uri: str, opts: dict | None) -> int:
    """The same history on any store: create, append, delete, update, merge_insert, compaction."""
    lance_format.write_dataset(pa.table({"id": [1, 2, 3], "name": ["a", "b", None]}), uri,
                               enable_stable_row_ids=True, storage_options=opts)
    lance_format.write_dataset(pa.table({"id": [4, 5], "name": ["d", "e"]}), uri, mode="append",
                               storage_options=opts)
    ds = lance_format.dataset(uri, storage_options=opts)
    ds.delete("id = 2")
    ds.update({"name": "'z'"}, where="id = 3")
    source = pa.table({"id": [4, 6], "name": ["dd", "f"]})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(source)
    ds.optimize.compact_files()
    return ds.version


def history(uri: str, opts: dict | None = None) -> list[pa.Table]:
    ds = lance_format.dataset(uri, storage_options=opts)
    return [sorted_table(ds.checkout_version(v["version"]).to_table()) for v in ds.versions()]


def check_history_matches_local(uri: str, opts: dict | None, local: str) -> int:
    latest = mutate(uri, opts)
    assert mutate(local, None) == latest >= 6
    remote, here = history(uri, opts), history(local)
    assert len(remote) == latest
    for version, (a, b) in enumerate(zip(remote, here), start=1):
        assert a.equals(b), f"version {version} differs from the local table"
    ds = lance_format.dataset(uri, storage_options=opts)
    stats = ds.cleanup_old_versions(older_than=timedelta(0))
    assert stats.old_versions == latest - 1 and stats.data_files_removed > 0
    again = lance_format.dataset(uri, storage_options=opts)
    assert [v["version"] for v in again.versions()] == [latest]
    assert sorted_table(again.to_table()).equals(here[-1])
    return latest


def check_racing_puts(store: ObjectStore, writers: int = 6) -> None:
    assert store.put_if_not_exists("_versions/x.bin", b"first") is True
    assert store.put_if_not_exists("_versions/x.bin", b"second") is False
    assert store.read_bytes("_versions/x.bin") == b"first"
    assert [i.base_name for i in store.list_dir("_versions")] == ["x.bin"]
    assert store.list_dir("nothing-here") == []
    barrier = threading.Barrier(writers)
    results: list[bool] = []

    def put(i: int) -> None:
        barrier.wait()
        results.append(store.put_if_not_exists("_versions/race.manifest", f"writer {i}".encode()))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * (writers - 1) + [True]
    assert store.read_bytes("_versions/race.manifest").startswith(b"writer ")


def check_concurrent_committers(uri: str, opts: dict | None, writers: int = 3,
                                read: Callable[[str], list[int]] | None = None) -> None:
    lance_format.write_dataset(pa.table({"id": [0], "w": [0]}), uri, storage_options=opts)
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            barrier.wait()
            lance_format.write_dataset(pa.table({"id": [writer], "w": [writer]}), uri, mode="append",
                                       storage_options=opts)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(1, writers + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors  # appends never conflict: losers rebase onto the winner's version
    ds = lance_format.dataset(uri, storage_options=opts)
    assert ds.version == writers + 1
    assert sorted(ds.to_table().column("id").to_pylist()) == list(range(writers + 1))
    if read is not None:  # another engine (pylance) sees the same rows
        assert read(uri) == list(range(writers + 1))

    # Two updates of one row from the same read version: the second one conflicts or rebases,
    # it never lands on top of the first as if it had read it.
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


def check_tags(uri: str, opts: dict | None) -> None:
    ds = lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts)
    lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append", storage_options=opts)
    ds.tags.create("first", 1)
    try:
        ds.tags.create("first", 1)
    except TagError:
        pass
    else:
        raise AssertionError("a second tag of the same name was created")
    assert lance_format.dataset(uri, version="first", storage_options=opts).count_rows() == 1


def many_versions(uri: str, opts: dict | None, count: int, *, v2_names: bool = True) -> None:
    """A table with ``count`` versions: one real commit, its manifest re-encoded for the others
    (uploaded in parallel through this engine's store)."""
    from concurrent.futures import ThreadPoolExecutor

    from lance_format.table.manifest import encode_manifest, read_manifest
    from lance_format.table.naming import U64_MAX

    def name(version: int) -> str:
        return f"_versions/{U64_MAX - version:020d}.manifest" if v2_names else f"_versions/{version}.manifest"

    lance_format.write_dataset(pa.table({"id": [1]}), uri, storage_options=opts,
                               enable_v2_manifest_paths=v2_names)
    store = ObjectStore(uri, opts)
    base = read_manifest(store, name(1))

    def put(version: int) -> None:
        manifest = type(base.manifest)()
        manifest.CopyFrom(base.manifest)
        manifest.version = version
        store.write_bytes(name(version), encode_manifest(manifest, base.transaction, base.index_section))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(2, count + 1)))


def check_pickles(store: ObjectStore) -> None:
    store.write_bytes("a.bin", b"x")
    again = pickle.loads(pickle.dumps(store))
    assert again.uri == store.uri and again.storage_options == store.storage_options
    assert again.read_bytes("a.bin") == b"x"
