"""The external manifest store protocol through the pluggable interface: a manifest store
registered for a URI scheme of its own (an in-memory key-value store over ``memory://`` files),
commits that go through it, a writer stopped between the conditional put and the finalization,
refused conditional puts, and the registry's own checks."""

from __future__ import annotations

import threading
import uuid

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CommitConflictError, CorruptFileError, InvalidInputError
from lance_format.io import (
    ExternalManifestTarget,
    InMemoryManifestStore,
    ManifestLocation,
    ManifestStore,
    ObjectStore,
    register_manifest_store,
)
from lance_format.io.manifest_store import MANIFEST_STORES, ExternalManifests, final_path_of, staged_path
from lance_format.table.naming import list_versions

SCHEME = "kvtest+memory"
KV = InMemoryManifestStore()


def _factory(uri: str, options: dict[str, str]) -> ExternalManifestTarget:
    rest = uri.split("://", 1)[1]
    return ExternalManifestTarget(object_uri=f"memory://{rest}", storage_options=options, store=KV, base_uri=rest)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_manifest_store(SCHEME, _factory)
    yield
    MANIFEST_STORES.pop(SCHEME, None)


@pytest.fixture
def uri() -> str:
    return f"{SCHEME}://tables/{uuid.uuid4().hex}"


def _base(uri: str) -> str:
    return uri.split("://", 1)[1]


def test_the_in_memory_store_satisfies_the_protocol():
    assert isinstance(KV, ManifestStore)


def test_commits_go_through_the_registered_store(uri):
    lance_format.write_dataset(pa.table({"id": [1, 2]}), uri)
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.delete("id = 1")
    ds = lance_format.dataset(uri)
    assert ds.version == 3 and sorted(ds.to_table().column("id").to_pylist()) == [2, 3]
    entries = [KV.get(_base(uri), v) for v in (1, 2, 3)]
    store = ObjectStore(uri)
    for version, entry in enumerate(entries, start=1):
        # every entry is finalized, names the manifest under the table's key and its exact size
        assert entry is not None and not entry.staged
        relative = entry.path[len(_base(uri)) + 1:]
        assert entry.path.startswith(_base(uri) + "/_versions/") and store.size(relative) == entry.size
        assert list_versions(store).versions[version] == relative
    # no staged manifest is left behind
    assert [i.base_name for i in store.list_dir("_versions") if not i.base_name.endswith(".manifest")] == []
    assert KV.get(_base(uri), 4) is None


def _stop_after_conditional_put(monkeypatch) -> None:
    """The writer stops between the two steps: its entry is in, its manifest still staged."""

    def fail(*args, **kwargs):
        raise ConnectionError("connection lost after the conditional put")

    monkeypatch.setattr(ExternalManifests, "_finish", fail)


@pytest.mark.parametrize("next_step", ["reader", "writer", "version listing"])
def test_a_commit_stopped_halfway_is_finished_by_the_next_reader_or_writer(uri, monkeypatch, next_step):
    lance_format.write_dataset(pa.table({"id": [1]}), uri)
    _stop_after_conditional_put(monkeypatch)
    # The commit stands once the store holds its entry: the writer reports version 2 although
    # the connection was lost before it could finalize the manifest.
    assert lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append").version == 2
    monkeypatch.undo()
    entry = KV.get(_base(uri), 2)
    assert entry is not None and entry.staged  # committed, but only staged
    store = ObjectStore(uri)
    final = final_path_of(entry.path[len(_base(uri)) + 1:])
    assert not store.exists(final)

    if next_step == "reader":
        ds = lance_format.dataset(uri)
        assert ds.version == 2 and sorted(ds.to_table().column("id").to_pylist()) == [1, 2]
    elif next_step == "writer":
        lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append")
        ds = lance_format.dataset(uri)
        assert ds.version == 3 and sorted(ds.to_table().column("id").to_pylist()) == [1, 2, 3]
    else:
        assert lance_format.TableVersions(uri).after(1).versions == [2]
    entry = KV.get(_base(uri), 2)
    assert entry is not None and not entry.staged and store.exists(final)
    assert [i.base_name for i in store.list_dir("_versions") if not i.base_name.endswith(".manifest")] == []


def test_finishing_twice_is_harmless(uri):
    lance_format.write_dataset(pa.table({"id": [1]}), uri)
    store = ObjectStore(uri)
    external = store.manifest_store
    assert external is not None
    data = store.read_bytes(list_versions(store).versions[1])
    staged = staged_path("_versions/18446744073709551613.manifest")
    store.write_bytes(staged, data)  # version 2, as a writer stopped after its conditional put
    location = ManifestLocation(2, f"{_base(uri)}/{staged}", len(data))
    assert KV.put_if_not_exists(_base(uri), location)
    assert external.finalize(store, location) == "_versions/18446744073709551613.manifest"
    # a second finisher that read the staged entry before the first one flipped it
    assert external.finalize(store, location) == "_versions/18446744073709551613.manifest"
    assert KV.get(_base(uri), 2) == ManifestLocation(2, f"{_base(uri)}/_versions/18446744073709551613.manifest",
                                                     len(data))


def test_an_entry_naming_a_missing_manifest_is_corruption(uri):
    lance_format.write_dataset(pa.table({"id": [1]}), uri)
    ghost = f"{_base(uri)}/{staged_path('_versions/18446744073709551613.manifest')}"
    assert KV.put_if_not_exists(_base(uri), ManifestLocation(2, ghost, 10))
    with pytest.raises(CorruptFileError, match="staged manifest that is gone"):
        lance_format.dataset(uri)


class _RefusingStore(InMemoryManifestStore):
    """Refuses the first ``refusals`` conditional creates, as if another writer had won."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals
        self.refused = 0

    def put_if_not_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        if self.refused < self.refusals:
            self.refused += 1
            return False
        return super().put_if_not_exists(base_uri, location)


@pytest.mark.parametrize("refusals", [2, 1000])
def test_a_refused_conditional_put_is_retried_then_gives_up(refusals):
    kv = _RefusingStore(0)
    scheme = "kvrefuse+memory"
    register_manifest_store(scheme, lambda u, o: ExternalManifestTarget(
        f"memory://{u.split('://', 1)[1]}", o, kv, u.split("://", 1)[1]))
    try:
        uri = f"{scheme}://tables/{uuid.uuid4().hex}"
        lance_format.write_dataset(pa.table({"id": [1]}), uri)
        kv.refusals = refusals
        if refusals > 20:
            with pytest.raises(CommitConflictError, match="gave up"):
                lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append")
            assert lance_format.dataset(uri).version == 1
        else:
            lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append")
            assert kv.refused == refusals and lance_format.dataset(uri).version == 2
        # every refused attempt removed its staged manifest
        store = ObjectStore(uri)
        assert [i.base_name for i in store.list_dir("_versions") if not i.base_name.endswith(".manifest")] == []
    finally:
        MANIFEST_STORES.pop(scheme, None)


def test_concurrent_committers_through_the_store_lose_no_update(uri):
    lance_format.write_dataset(pa.table({"id": [0]}), uri)
    writers = 4
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def append(i: int) -> None:
        try:
            barrier.wait()
            lance_format.write_dataset(pa.table({"id": [i]}), uri, mode="append")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(1, writers + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ds = lance_format.dataset(uri)
    assert ds.version == writers + 1 and sorted(ds.to_table().column("id").to_pylist()) == list(range(writers + 1))
    assert all(not KV.get(_base(uri), v).staged for v in range(1, writers + 2))  # type: ignore[union-attr]


def test_versions_not_committed_through_the_store_are_ignored(uri):
    """A manifest above the store's latest version was not committed through the store (a
    writer that bypassed it): like Lance, readers do not see it."""
    lance_format.write_dataset(pa.table({"id": [1]}), uri)
    store = ObjectStore(uri)
    manifest = store.read_bytes("_versions/18446744073709551614.manifest")
    bare = ObjectStore(f"memory://{_base(uri)}")
    bare.write_bytes("_versions/18446744073709551613.manifest", manifest)
    assert list_versions(bare).latest == 2
    assert list_versions(store).latest == 1 and lance_format.dataset(uri).version == 1


def test_the_registry_refuses_object_store_schemes_and_bad_names():
    for scheme in ("s3", "memory", "", "1abc", "a b"):
        with pytest.raises(InvalidInputError):
            register_manifest_store(scheme, _factory)


class _LostResponseStore(InMemoryManifestStore):
    """Applies the conditional create, then loses the response (the connection drops)."""

    def __init__(self) -> None:
        super().__init__()
        self.drop_next = False

    def put_if_not_exists(self, base_uri: str, location: ManifestLocation) -> bool:
        applied = super().put_if_not_exists(base_uri, location)
        if self.drop_next:
            self.drop_next = False
            raise ConnectionError("connection reset after the request was sent")
        return applied


def test_a_lost_response_to_the_conditional_put_is_settled_by_reading_the_entry():
    kv = _LostResponseStore()
    scheme = "kvlost+memory"
    register_manifest_store(scheme, lambda u, o: ExternalManifestTarget(
        f"memory://{u.split('://', 1)[1]}", o, kv, u.split("://", 1)[1]))
    try:
        uri = f"{scheme}://tables/{uuid.uuid4().hex}"
        lance_format.write_dataset(pa.table({"id": [1]}), uri)
        kv.drop_next = True
        lance_format.write_dataset(pa.table({"id": [2]}), uri, mode="append")  # it did land: committed
        ds = lance_format.dataset(uri)
        assert ds.version == 2 and sorted(ds.to_table().column("id").to_pylist()) == [1, 2]
        assert not kv.get(uri.split("://", 1)[1], 2).staged  # type: ignore[union-attr]
    finally:
        MANIFEST_STORES.pop(scheme, None)
