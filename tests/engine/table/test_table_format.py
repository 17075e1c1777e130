"""Table-format pieces: the IO layer, manifest bytes, naming, flags and tags, against pylance."""

from __future__ import annotations

import json
import os
import threading

import lance
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError, PathEscapeError, TagError, UnsupportedFeatureError
from lance_format.io import ObjectStore, check_relative_path
from lance_format.proto import table_pb2
from lance_format.table import feature_flags
from lance_format.table.manifest import decode_manifest, encode_manifest, read_manifest
from lance_format.table.naming import ManifestNaming, list_versions, manifest_path, parse_manifest_name
from lance_format.table.tags import Tags


def _pylance_table(path, *, stable=False, index=False):
    t = pa.table({"id": pa.array(range(20), pa.int64()), "s": [f"v{i}" for i in range(20)]})
    ds = lance.write_dataset(t, path, data_storage_version="2.0", enable_stable_row_ids=stable)
    ds = lance.write_dataset(t, path, mode="append")
    ds.delete("id < 3")
    if index:
        ds.create_scalar_index("id", "BTREE")
    return lance.dataset(path)


# -- IO layer ---------------------------------------------------------------------------------
def test_put_if_not_exists_has_one_winner(tmp_path):
    store = ObjectStore(str(tmp_path))
    winners = []

    def attempt(i):
        if store.put_if_not_exists("_versions/1.manifest", f"writer {i}".encode()):
            winners.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert store.read_bytes("_versions/1.manifest") == f"writer {winners[0]}".encode()
    # no staging files are left behind
    assert sorted(os.listdir(tmp_path / "_versions")) == ["1.manifest"]


def test_file_uri_and_relative_paths(tmp_path):
    store = ObjectStore(f"file://{tmp_path}")
    store.write_bytes("data/a.lance", b"x")
    assert store.exists("data/a.lance") and store.size("data/a.lance") == 1
    assert store.root == str(tmp_path)


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "data/../../x", "..", "a/../../b", "c:/x", ""])
def test_paths_cannot_escape_the_root(tmp_path, bad):
    with pytest.raises(PathEscapeError):
        check_relative_path(bad)
    with pytest.raises(PathEscapeError):
        ObjectStore(str(tmp_path)).full_path(bad)


def test_unsupported_scheme():
    # s3://, gs://, az://, abfss://, memory:// and s3+ddb:// are supported (tests/test_object_store_*.py);
    # other schemes are refused clearly, naming what is supported
    for uri in ("hdfs://namenode/table", "oss://bucket/table", "gs+ddb://bucket/table"):
        with pytest.raises(UnsupportedFeatureError, match="gs://"):
            ObjectStore(uri)


# -- manifests --------------------------------------------------------------------------------
@pytest.mark.parametrize("stable,index", [(False, False), (True, False), (False, True)])
def test_pylance_manifests_reencode_byte_identically(tmp_path, stable, index):
    _pylance_table(str(tmp_path / "t"), stable=stable, index=index)
    store = ObjectStore(str(tmp_path / "t"))
    listing = list_versions(store)
    assert listing.naming is ManifestNaming.V2
    for version, path in listing.versions.items():
        raw = store.read_bytes(path)
        decoded = decode_manifest(raw, table=store.uri, path=path)
        assert decoded.manifest.version == version
        assert decoded.transaction is not None
        txn_file = store.read_bytes(f"_transactions/{decoded.manifest.transaction_file}")
        assert decoded.transaction.SerializeToString() == txn_file
        again = encode_manifest(decoded.manifest, decoded.transaction, decoded.index_section)
        assert again == raw, f"version {version} does not re-encode identically"
    if index:
        latest = read_manifest(store, listing.versions[listing.latest])
        assert latest.index_section is not None and len(latest.index_section.indices) == 1


def test_manifest_without_transaction_section_round_trips():
    manifest = table_pb2.Manifest(version=3)
    data = encode_manifest(manifest)
    decoded = decode_manifest(data, table="t", path="p")
    assert decoded.manifest.version == 3 and decoded.transaction is None and decoded.index_section is None


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:10],
        lambda b: b[:-4] + b"XXXX",
        lambda b: b"\x00" * len(b),
        lambda b: b[:-16] + (10**9).to_bytes(8, "little") + b[-8:],
        lambda b: b[:4] + b"\xff" * 40 + b[44:],
        lambda b: b"",
    ],
    ids=["truncated", "bad-magic", "zeros", "offset-past-end", "garbage-body", "empty"],
)
def test_corrupt_manifests_raise_named_errors(tmp_path, mutate):
    _pylance_table(str(tmp_path / "t"))
    store = ObjectStore(str(tmp_path / "t"))
    path = list_versions(store).versions[1]
    with pytest.raises(CorruptFileError) as info:
        decode_manifest(mutate(store.read_bytes(path)), table=store.uri, path=path)
    assert path in str(info.value)


# -- naming -----------------------------------------------------------------------------------
def test_manifest_naming_schemes():
    assert manifest_path(1, ManifestNaming.V2) == "_versions/18446744073709551614.manifest"
    assert manifest_path(7, ManifestNaming.V1) == "_versions/7.manifest"
    assert parse_manifest_name("18446744073709551614.manifest") == (1, ManifestNaming.V2)
    assert parse_manifest_name("12.manifest") == (12, ManifestNaming.V1)
    assert parse_manifest_name("latest_version_hint.json") is None
    assert parse_manifest_name(".tmp_7.manifest_abc") is None


def test_mixed_naming_is_refused(tmp_path):
    store = ObjectStore(str(tmp_path))
    store.write_bytes("_versions/1.manifest", b"x")
    store.write_bytes("_versions/18446744073709551613.manifest", b"x")
    with pytest.raises(CorruptFileError, match="mixes V1 and V2"):
        list_versions(store)


# -- feature flags ----------------------------------------------------------------------------
def test_feature_flags_match_pylance(tmp_path):
    ds = _pylance_table(str(tmp_path / "t"), stable=True)
    store = ObjectStore(str(tmp_path / "t"))
    manifest = read_manifest(store, list_versions(store).versions[ds.version]).manifest
    assert feature_flags.compute_flags(manifest, stable_row_ids=True) == (
        manifest.reader_feature_flags,
        manifest.writer_feature_flags,
    ) == (3, 3)
    manifest.ClearField("fragments")
    manifest.config["k"] = "v"
    assert feature_flags.compute_flags(manifest, stable_row_ids=False) == (0, 8)


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_unknown_flags_are_refused(which):
    manifest = table_pb2.Manifest(version=4)
    setattr(manifest, f"{which}_feature_flags", 128)
    with pytest.raises(UnsupportedFeatureError, match="unknown bits 0x80"):
        feature_flags.check_writable(manifest, table="t", path="p")
    if which == "writer":
        feature_flags.check_readable(manifest, table="t", path="p")  # readers may ignore writer flags


# -- tags -------------------------------------------------------------------------------------
def test_tags_are_compatible_with_pylance(tmp_path):
    ds = _pylance_table(str(tmp_path / "t"))
    ds.tags.create("from-pylance", 1)
    ours = Tags(ObjectStore(str(tmp_path / "t")))
    assert ours.get_version("from-pylance") == 1
    ours.create("from-us", 2)
    ours.update("from-pylance", 3)
    listed = lance.dataset(str(tmp_path / "t")).tags.list()
    assert listed["from-us"]["version"] == 2 and listed["from-pylance"]["version"] == 3
    assert lance.dataset(str(tmp_path / "t"), version="from-us").version == 2
    raw = json.loads((tmp_path / "t" / "_refs" / "tags" / "from-us.json").read_text())
    assert set(raw) == {"branch", "version", "createdAt", "updatedAt", "manifestSize", "metadata"}
    assert ours.list()["from-us"]["version"] == 2
    with pytest.raises(TagError):
        ours.create("from-us", 1)
    with pytest.raises(TagError):
        ours.create("../escape", 1)
    ours.delete("from-us")
    assert "from-us" not in lance.dataset(str(tmp_path / "t")).tags.list()
    with pytest.raises(TagError):
        ours.delete("from-us")
