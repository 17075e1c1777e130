"""Commits on top of manifests written by old Lance releases (no ``max_fragment_id``)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format
from lance_format.table.manifest import decode_manifest, encode_manifest
from tests.compat import assert_same_history


def _edit_latest_manifest(uri: str, edit) -> None:
    path = min((Path(uri) / "_versions").glob("*.manifest"), key=lambda p: p.name)  # V2 names: latest first
    mf = decode_manifest(path.read_bytes(), table=uri, path=str(path))
    edit(mf.manifest)
    path.write_bytes(encode_manifest(mf.manifest, mf.transaction, mf.index_section))


def _strip_max_fragment_id(uri: str) -> None:
    def strip(manifest):
        assert manifest.HasField("max_fragment_id")
        manifest.ClearField("max_fragment_id")

    _edit_latest_manifest(uri, strip)


def test_append_after_a_manifest_without_max_fragment_id(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"x": range(30)}), uri, data_storage_version="2.0", max_rows_per_file=10)
    lance.dataset(uri).delete("x < 10")  # fragment 0 goes away: ids 1, 2 remain
    _strip_max_fragment_id(uri)
    lance_format.write_dataset(pa.table({"x": range(100, 105)}), uri, mode="append")
    ours = lance_format.dataset(uri)
    ids = [f.fragment_id for f in ours.get_fragments()]
    assert ids == [1, 2, 3]
    assert ours.manifest.max_fragment_id == 3
    theirs = lance.dataset(uri)  # official Lance refuses tables with duplicate fragment ids
    assert theirs.count_rows() == 25
    assert_same_history(uri)
    # and official Lance appends after ours without a clash either
    lance.write_dataset(pa.table({"x": [7]}), uri, mode="append")
    assert [f.fragment_id for f in lance_format.dataset(uri).get_fragments()] == [1, 2, 3, 4]


def test_update_after_a_manifest_without_max_fragment_id(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"x": range(20), "s": ["a"] * 20}), uri, data_storage_version="2.0",
                        max_rows_per_file=10)
    _strip_max_fragment_id(uri)
    lance_format.dataset(uri).update({"s": "'b'"}, where="x = 3")
    ids = [f.fragment_id for f in lance_format.dataset(uri).get_fragments()]
    assert len(ids) == len(set(ids)) and max(ids) == 2
    assert_same_history(uri)


def test_data_files_of_version_0_3_read_as_2_0(tmp_path):
    # Lance 0.13-0.15 called 2.0 "0.3" in DataFile and wrote no data_format, only writer flag 4
    uri = str(tmp_path / "t")
    table = pa.table({"x": range(50), "s": [f"s{i}" for i in range(50)], "l": [[i] * (i % 3) for i in range(50)]})
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=20)

    def make_0_3(manifest):
        for fragment in manifest.fragments:
            for data_file in fragment.files:
                data_file.file_major_version, data_file.file_minor_version = 0, 3
        manifest.ClearField("data_format")
        manifest.writer_feature_flags |= 4

    _edit_latest_manifest(uri, make_0_3)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.data_storage_version == theirs.data_storage_version == "2.0"
    assert_same_history(uri)
    assert ours.take([45, 3]).equals(theirs.take([45, 3]))


def test_storage_version_of_manifests_without_data_format(tmp_path):
    legacy = str(tmp_path / "legacy")
    lance.write_dataset(pa.table({"x": range(5)}), legacy, data_storage_version="legacy")
    _edit_latest_manifest(legacy, lambda m: m.ClearField("data_format"))
    assert lance_format.dataset(legacy).data_storage_version == lance.dataset(legacy).data_storage_version == "0.1"
    assert_same_history(legacy)

    for flags, expected in ((0, "0.1"), (4, "2.2")):
        empty = str(tmp_path / f"empty{flags}")
        lance.write_dataset(pa.table({"x": pa.array([], pa.int64())}), empty, data_storage_version="2.0")

        def strip(manifest, flags=flags):
            manifest.ClearField("data_format")
            manifest.writer_feature_flags = flags

        _edit_latest_manifest(empty, strip)
        theirs = lance.dataset(empty).data_storage_version
        assert lance_format.dataset(empty).data_storage_version == theirs == expected
