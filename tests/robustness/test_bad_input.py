"""Bad input never passes silently: typed errors naming the file, and nothing on disk changes."""

from __future__ import annotations

import os
import struct

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CorruptFileError,
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidInputError,
    PathEscapeError,
    SchemaMismatchError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lance_format.io import ObjectStore
from lance_format.table.manifest import encode_manifest, read_manifest
from lance_format.table.naming import list_versions


def _snapshot(root) -> dict[str, bytes]:
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


def _table(tmp_path, **kwargs) -> str:
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"id": pa.array(range(10), pa.int64()), "s": list("abcdefghij")}), uri,
                               **kwargs)
    return uri


def _latest_manifest_path(uri: str) -> str:
    store = ObjectStore(uri)
    listing = list_versions(store)
    return os.path.join(uri, listing.versions[listing.latest])


def _rewrite_latest_manifest(uri: str, edit) -> None:
    store = ObjectStore(uri)
    listing = list_versions(store)
    path = listing.versions[listing.latest]
    mf = read_manifest(store, path)
    edit(mf.manifest)
    with open(os.path.join(uri, path), "wb") as f:
        f.write(encode_manifest(mf.manifest, mf.transaction, mf.index_section))


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b[:-4] + b"LANX",
        lambda b: os.urandom(len(b)),
        lambda b: b[:-16] + struct.pack("<q", len(b) * 3) + b[-8:],
    ],
    ids=["truncated", "wrong-magic", "garbage", "bad-offset"],
)
def test_corrupt_manifest_is_named(tmp_path, corrupt):
    uri = _table(tmp_path)
    path = _latest_manifest_path(uri)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(corrupt(data))
    before = _snapshot(uri)
    with pytest.raises(CorruptFileError) as info:
        lance_format.dataset(uri)
    assert os.path.basename(path) in str(info.value) and uri in str(info.value)
    with pytest.raises(CorruptFileError):
        lance_format.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri, mode="append")
    assert _snapshot(uri) == before


def test_missing_data_file(tmp_path):
    uri = _table(tmp_path)
    data_dir = os.path.join(uri, "data")
    name = os.listdir(data_dir)[0]
    os.remove(os.path.join(data_dir, name))
    ds = lance_format.dataset(uri)
    assert ds.count_rows() == 10  # metadata-only answers still work
    with pytest.raises(CorruptFileError, match=name):
        ds.to_table()


def test_truncated_data_file(tmp_path):
    uri = _table(tmp_path)
    data_dir = os.path.join(uri, "data")
    path = os.path.join(data_dir, os.listdir(data_dir)[0])
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 50)
    with pytest.raises(CorruptFileError, match=os.path.basename(path)):
        lance_format.dataset(uri).to_table()


@pytest.mark.parametrize("bad_path", ["../../outside.lance", "../_versions/x.lance", "/etc/passwd"])
def test_data_file_path_escaping_the_root(tmp_path, bad_path):
    uri = _table(tmp_path)

    def edit(manifest):
        manifest.fragments[0].files[0].path = bad_path

    _rewrite_latest_manifest(uri, edit)
    with pytest.raises(PathEscapeError):
        lance_format.dataset(uri).to_table()


def test_external_row_id_path_escaping_the_root(tmp_path):
    uri = _table(tmp_path, enable_stable_row_ids=True)

    def edit(manifest):
        fragment = manifest.fragments[0]
        fragment.ClearField("inline_row_ids")
        fragment.external_row_ids.path = "../../secret"
        fragment.external_row_ids.size = 6

    _rewrite_latest_manifest(uri, edit)
    with pytest.raises(PathEscapeError):
        lance_format.dataset(uri).to_table(with_row_id=True)


@pytest.mark.parametrize("which", ["reader", "writer"])
def test_unknown_feature_flags(tmp_path, which):
    uri = _table(tmp_path)

    def edit(manifest):
        setattr(manifest, f"{which}_feature_flags", getattr(manifest, f"{which}_feature_flags") | 128)

    _rewrite_latest_manifest(uri, edit)
    before = _snapshot(uri)
    if which == "reader":
        with pytest.raises(UnsupportedFeatureError, match="unknown bits 0x80"):
            lance_format.dataset(uri)
    else:
        assert lance_format.dataset(uri).count_rows() == 10
    with pytest.raises(UnsupportedFeatureError, match="unknown bits 0x80"):
        lance_format.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri, mode="append")
    assert _snapshot(uri) == before


@pytest.mark.parametrize(
    "data",
    [
        pa.table({"id": pa.array([1], pa.int32()), "s": ["x"]}),
        # (a subset of the nullable columns is a valid append, as in pylance)
        pa.table({"id": pa.array([1], pa.int64()), "S": ["x"]}),
        pa.table({"id": pa.array([1], pa.int64()), "s": ["x"], "extra": [1.0]}),
    ],
    ids=["wrong-type", "renamed-column", "extra-column"],
)
def test_schema_mismatch_on_append(tmp_path, data):
    uri = _table(tmp_path)
    before = _snapshot(uri)
    with pytest.raises(SchemaMismatchError) as info:
        lance_format.write_dataset(data, uri, mode="append")
    assert uri in str(info.value)
    assert _snapshot(uri) == before


def test_nulls_in_non_nullable_column(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    lance_format.write_dataset(pa.table({"id": [1, 2]}, schema=schema), uri)
    before = _snapshot(uri)
    with pytest.raises(SchemaMismatchError, match="field `id` contained null values"):
        lance_format.write_dataset(pa.table({"id": pa.array([3, None], pa.int64())}), uri, mode="append")
    assert _snapshot(uri) == before


def test_failed_write_leaves_no_version_and_no_files(tmp_path):
    uri = _table(tmp_path)
    before = _snapshot(uri)

    def batches():
        yield pa.record_batch({"id": pa.array(range(100), pa.int64()), "s": ["x"] * 100})
        raise RuntimeError("source failed halfway")

    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    with pytest.raises(RuntimeError, match="halfway"):
        lance_format.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), uri, mode="append",
                                   max_rows_per_file=30)
    assert _snapshot(uri) == before
    assert lance.dataset(uri).version == 1


def test_modes_and_missing_tables(tmp_path):
    uri = _table(tmp_path)
    with pytest.raises(DatasetAlreadyExistsError):
        lance_format.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri)
    with pytest.raises(InvalidInputError):
        lance_format.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri, mode="upsert")
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(str(tmp_path / "nothing"))
    with pytest.raises(VersionNotFoundError):
        lance_format.dataset(uri, version=7)
    with pytest.raises(lance_format.TagError):
        lance_format.dataset(uri, version="no-such-tag")
    with pytest.raises(UnsupportedFeatureError):
        lance_format.write_dataset(pa.table({"id": [1]}), str(tmp_path / "v"), data_storage_version="2.3")
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).to_table(columns=["nope"])
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).to_table(filter="nope > 1")
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).take([10])


def test_hint_file_is_only_a_hint(tmp_path):
    uri = _table(tmp_path)
    lance_format.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri, mode="append")
    hint = os.path.join(uri, "_versions", "latest_version_hint.json")
    for content in (b'{"version":1}', b'{"version":99}', b"garbage"):
        with open(hint, "wb") as f:
            f.write(content)
        assert lance_format.dataset(uri).version == 2
    os.remove(hint)
    assert lance_format.dataset(uri).version == 2
    lance_format.write_dataset(pa.table({"id": [2], "s": ["y"]}), uri, mode="append")
    assert open(hint).read() == '{"version":3}'


def test_unknown_manifest_fields_survive_our_commits(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"id": [1, 2]}), uri, data_storage_version="2.0")
    path = _latest_manifest_path(uri)
    store = ObjectStore(uri)
    mf = read_manifest(store, os.path.relpath(path, uri))
    unknown = b"\xf8\x3e\x07"  # field 999, varint 7
    raw_manifest = mf.manifest.SerializeToString() + unknown
    mf.manifest.ParseFromString(raw_manifest)
    with open(path, "wb") as f:
        f.write(encode_manifest(mf.manifest, mf.transaction, mf.index_section))
    lance_format.write_dataset(pa.table({"id": [3]}), uri, mode="append")
    new = read_manifest(store, list_versions(store).versions[2]).manifest
    assert new.SerializeToString().endswith(unknown) or unknown in new.SerializeToString()
    assert lance.dataset(uri).to_table().column("id").to_pylist() == [1, 2, 3]
