"""Blob v2 columns (``lance.blob.v2``, file version 2.2) written by this engine are stored as
pylance 14 stores them (inline bytes, pack and dedicated sidecars) and read alike by both engines;
the blob v2 Python names behave like pylance's."""

from __future__ import annotations

import glob
import os
import shutil
from datetime import timedelta

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, UnsupportedFeatureError
from tests.compat import assert_same_version

# inline (<= 64 KiB), null, empty, packed (<= 4 MiB), dedicated
VALUES = [b"a" * 10, None, b"", b"b" * 100_000, b"c" * 70_000, b"d" * 5_000_000, b"hello", b"", None,
          b"e" * 65_536, b"f" * 65_537]
# the descriptor field's two metadata entries come in hash order (pylance's differs run to run)
_BLOB_ENTRY = b"R\x1b\n\x13lance-encoding:blob\x12\x04true"
_PACKED_ENTRY = b"R\x1d\n\x15lance-encoding:packed\x12\x04true"


def blob_table(module, values: list, first_id: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(first_id, first_id + len(values)), pa.int64()),
                     "b": module.blob_array(values)})


def stored_files(uri: str) -> dict[str, bytes]:
    """Data files and sidecars by their path below ``data/``, data file names replaced by their order."""
    data = os.path.join(uri, "data")
    names = {os.path.splitext(n)[0]: f"file{i}" for i, n in enumerate(sorted(
        n for n in os.listdir(data) if n.endswith(".lance")))}
    out = {}
    for path in glob.glob(os.path.join(data, "**", "*.*"), recursive=True):
        relative = os.path.relpath(path, data)
        for name, alias in names.items():
            relative = relative.replace(name, alias)
        out[relative] = open(path, "rb").read()
    return out


def contents(ds, indices: list[int]) -> list[bytes | None]:
    return [None if f is None else f.readall() for f in ds.take_blobs("b", indices=indices)]


def test_files_match_pylance(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(blob_table(lance_format, VALUES), ours, data_storage_version="2.2")
    lance.write_dataset(blob_table(lance, VALUES), theirs, data_storage_version="2.2")
    mine, official = stored_files(ours), stored_files(theirs)
    assert sorted(mine) == sorted(official) == ["file0.lance", "file0/01000000000000000000000000000000.blob",
                                                "file0/10000000000000000000000000000000.blob"]
    for name in mine:
        if name.endswith(".blob"):
            assert mine[name] == official[name], name
    # the data file too, up to the order of two metadata entries in its schema
    def canonical(data: bytes) -> bytes:
        assert data.count(_PACKED_ENTRY) == data.count(_BLOB_ENTRY) == 1
        return data.replace(_PACKED_ENTRY + _BLOB_ENTRY, _BLOB_ENTRY + _PACKED_ENTRY)

    assert canonical(mine["file0.lance"]) == canonical(official["file0.lance"])


def test_both_engines_read_our_blob_v2_table(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(blob_table(lance_format, VALUES), uri, data_storage_version="2.2")
    everything = list(range(len(VALUES)))
    for ds in (lance.dataset(uri), lance_format.dataset(uri)):
        assert ds.schema.field("b").type.extension_name == "lance.blob.v2"
        assert contents(ds, everything) == VALUES
    assert_same_version(uri, 1)
    assert lance_format.dataset(uri).read_blobs("b", indices=everything) == lance.dataset(uri).read_blobs(
        "b", indices=everything)


def test_appends_deletes_and_takes_across_fragments(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(blob_table(lance, VALUES[:6]), uri, data_storage_version="2.2")
    lance_format.write_dataset(blob_table(lance_format, VALUES[6:], 100), uri, mode="append")
    # pylance's blob arrays appended by this engine, ours by pylance
    lance_format.write_dataset(blob_table(lance, [b"x" * 80_000, None], 200), uri, mode="append")
    lance.write_dataset(blob_table(lance_format, [b"", b"y"], 300), uri, mode="append")
    lance_format.dataset(uri).delete("id = 3 OR id = 101")
    theirs = lance.dataset(uri)
    for v in theirs.versions():
        assert_same_version(uri, v["version"])
    ids = theirs.to_table(columns=["id"]).column("id").to_pylist()
    source = {**dict(enumerate(VALUES[:6])), **{100 + i: v for i, v in enumerate(VALUES[6:])},
              200: b"x" * 80_000, 201: None, 300: b"", 301: b"y"}
    everything = list(range(len(ids)))
    assert contents(theirs, everything) == contents(lance_format.dataset(uri), everything) == [source[i] for i in ids]


def test_thresholds_from_blob_field(tmp_path):
    """blob_field's thresholds decide inline / packed / dedicated, as in pylance."""
    values = [b"a" * 10, b"b" * 100, b"c" * 1000, b"d" * 3000, b"e" * 3000]
    uris = {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        schema = pa.schema([module.blob_field("b", inline_size_threshold=50, dedicated_size_threshold=2000,
                                              pack_file_size_threshold=600)])
        uris[name] = str(tmp_path / name)
        table = pa.table({"b": module.blob_array(values)}, schema=schema)
        module.write_dataset(table, uris[name], data_storage_version="2.2")
    ours, theirs = lance_format.dataset(uris["ours"]), lance.dataset(uris["theirs"])
    assert ours.schema.equals(theirs.schema, check_metadata=True)
    assert ours.to_table().equals(theirs.to_table())
    assert [d["kind"] for d in theirs.to_table().column("b").to_pylist()] == [0, 1, 1, 2, 2]
    assert sorted(stored_files(uris["ours"])) == sorted(stored_files(uris["theirs"]))


def test_blob_v2_names_behave_like_pylance():
    blob = lance_format.Blob.from_uri("s3://bucket/key", 5, 10)
    assert (blob.uri, blob.position, blob.size) == ("s3://bucket/key", 5, 10)
    assert lance_format.Blob.empty().data == b"" and lance_format.Blob.from_bytes(bytearray(b"x")).data == b"x"
    for bad in ({}, {"data": b"x", "uri": "u"}, {"uri": ""}, {"data": b"x", "position": 1, "size": 1},
                {"uri": "u", "position": 1}, {"uri": "u", "position": 0, "size": 0}):
        with pytest.raises(ValueError):
            lance.Blob(**bad)
        with pytest.raises(InvalidInputError):
            lance_format.Blob(**bad)
    values = [b"x", None, "s3://b/k", lance_format.Blob.empty()]
    ours, theirs = lance_format.blob_array(values), lance.blob_array(
        [v if not isinstance(v, lance_format.Blob) else lance.Blob.empty() for v in values])
    assert ours.type.extension_name == theirs.type.extension_name == "lance.blob.v2"
    assert ours.storage.equals(theirs.storage) and isinstance(ours, lance_format.BlobArray)
    with pytest.raises(TypeError):
        lance_format.blob_array([1])
    for kwargs in ({}, {"nullable": False, "inline_size_threshold": 0, "dedicated_size_threshold": 10,
                        "pack_file_size_threshold": 99}):
        a, b = lance_format.blob_field("b", **kwargs), lance.blob_field("b", **kwargs)
        assert (a.name, a.nullable, a.metadata, a.type.storage_type) == (b.name, b.nullable, b.metadata,
                                                                         b.type.storage_type)
    for bad in ({"inline_size_threshold": -1}, {"dedicated_size_threshold": 0}):
        with pytest.raises(ValueError):
            lance.blob_field("b", **bad)
        with pytest.raises(InvalidInputError):
            lance_format.blob_field("b", **bad)


def test_external_blobs_are_refused(tmp_path):
    with pytest.raises(UnsupportedFeatureError, match="external blobs") as info:
        lance_format.write_dataset(pa.table({"b": lance_format.blob_array(["s3://bucket/key"])}),
                                   str(tmp_path / "e"), data_storage_version="2.2")
    assert info.value.column == "b"
    assert not glob.glob(str(tmp_path / "e" / "data" / "**" / "*.*"), recursive=True)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_compaction_and_update_rewrite_blobs_like_pylance(tmp_path, version):
    """Rows rewritten from their blobs' bytes: the same rows, blobs and descriptions as pylance's."""
    legacy = pa.schema([pa.field("id", pa.int64()), pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])

    def rows(values: list, first: int) -> pa.Table:
        if version == "2.2":
            return blob_table(lance, values, first)
        return pa.table({"id": pa.array(range(first, first + len(values)), pa.int64()),
                         "b": pa.array(values, pa.large_binary())}, schema=legacy)

    results = {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(rows([b"a", None, b"x" * 70_000], 0), uri, data_storage_version=version)
        lance.write_dataset(rows([b"b", b"", b"y" * 5_000_000], 10), uri, mode="append")
        lance.dataset(uri).delete("id = 1")
        module.dataset(uri).optimize.compact_files()
        module.dataset(uri).update({"id": "id + 100"}, where="id >= 2")
        ds = lance.dataset(uri)
        results[name] = (len(ds.get_fragments()), ds.to_table(), contents(ds, list(range(ds.count_rows()))))
        assert_same_version(uri, ds.version)
    assert results["ours"][0] == results["theirs"][0]
    assert results["ours"][1].equals(results["theirs"][1])
    assert results["ours"][2] == results["theirs"][2] == [b"a", b"x" * 70_000, b"b", b"", b"y" * 5_000_000]


def test_sidecars_uploaded_ahead_then_the_data_file(tmp_path):
    """LanceFileSession's blob writers, BlobDescriptorArrayBuilder and the file writer: the same
    calls give the same sidecars and data file in both engines."""
    import importlib

    results = {}
    for name in ("lance", "lance_format"):
        module, files = importlib.import_module(name), importlib.import_module(f"{name}.file")
        base = tmp_path / name
        base.mkdir()
        session = files.LanceFileSession(str(base))
        packed = session.open_packed_blob_writer("f.lance", 1)
        assert packed.blob_id == 1
        packed.write_blob(b"hello" * 20_000)
        packed.write_blobs(pa.array([b"xy", b""], pa.large_binary()))
        references = packed.finish()
        dedicated = session.open_dedicated_blob_writer("f.lance", 2)
        dedicated.write(b"D" * 7)
        dedicated.write(bytearray(b"E" * 3))
        whole = dedicated.finish()
        with pytest.raises(ValueError):
            dedicated.blob_id  # noqa: B018 - pylance refuses it once finished
        builder = module.BlobDescriptorArrayBuilder("b")
        builder.append(whole)
        builder.append_inline(b"tiny")
        builder.append_null()
        builder.extend_packed(1, [0, 100_000], [100_000, 2])
        builder.extend(references)
        with pytest.raises(TypeError):
            builder.append(b"raw")
        column = builder.finish()
        schema = pa.schema([pa.field("id", pa.int64()), builder.field])
        with files.LanceFileWriter(str(base / "f.lance"), schema, version="2.2") as writer:
            writer.write_batch(pa.record_batch([pa.array(range(len(column)), pa.int64()), column], schema=schema))
        results[name] = ([repr(r) for r in references], repr(whole), column.to_pylist(), builder.field,
                         {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*.*")})
    assert results["lance"][:4] == results["lance_format"][:4]
    assert results["lance"][4].keys() == results["lance_format"][4].keys()
    for name, data in results["lance"][4].items():
        mine = results["lance_format"][4][name]
        if name.endswith(".lance"):  # up to the order of two map entries (see test_files_match_pylance)
            mine = mine.replace(_PACKED_ENTRY + _BLOB_ENTRY, _BLOB_ENTRY + _PACKED_ENTRY)
            data = data.replace(_PACKED_ENTRY + _BLOB_ENTRY, _BLOB_ENTRY + _PACKED_ENTRY)
        assert mine == data, name


def test_cleanup_removes_sidecars_with_their_data_file(tmp_path):
    # one table, copied: the manifests of two pylance writes of it now and then differ in length
    # (the commit timestamp is a varint; CI once saw 1 byte), and bytes_removed counts them
    written = str(tmp_path / "written")
    table = blob_table(lance, [b"x" * 70_000, b"y" * 5_000_000])
    lance.write_dataset(table, written)
    lance.write_dataset(table, written, mode="overwrite")
    stats, left = {}, {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        uri = str(tmp_path / name)
        shutil.copytree(written, uri)
        result = module.dataset(uri).cleanup_old_versions(older_than=timedelta(0), delete_unverified=True)
        stats[name] = (result.bytes_removed, result.data_files_removed)
        left[name] = sorted(stored_files(uri))
    assert stats["ours"] == stats["theirs"] and stats["ours"][1] == 3
    assert left["ours"] == left["theirs"] == ["file0.lance", "file0/01000000000000000000000000000000.blob",
                                              "file0/10000000000000000000000000000000.blob"]
    assert lance.dataset(str(tmp_path / "ours")).take_blobs("b", indices=[1])[0].size() == 5_000_000


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_merge_insert_keeps_target_blobs_like_pylance(tmp_path, version):
    """Updated rows keep the blobs the source does not give (read as bytes, stored anew)."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.int64()),
                        pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    results = {}
    for name, module in (("ours", lance_format), ("theirs", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(pa.table({"id": [0, 1, 2], "x": [0, 0, 0], "b": pa.array([b"a", None, b"c" * 70_000],
                                                                                     pa.large_binary())},
                                     schema=schema), uri, data_storage_version=version)
        module.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": [0, 2, 5], "x": [7, 8, 9]}))
        ds = lance.dataset(uri)
        results[name] = (ds.to_table(), contents(ds, list(range(ds.count_rows()))))
        assert_same_version(uri, ds.version)
    assert results["ours"][0].equals(results["theirs"][0])
    assert results["ours"][1] == results["theirs"][1] == [None, b"a", b"c" * 70_000, None]
