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


def _strings_as_lance_0_13(manifest, names: dict[str, str]) -> None:
    """Turn ``list<uint8>`` fields into the string/binary fields Lance 0.13 wrote: the field
    keeps the list offsets column, its bytes stay in the next column, and the schema names no
    child (``names``: field name -> logical type)."""
    dropped = set()
    for field in manifest.fields:
        if field.name in names:
            field.logical_type = names[field.name]
            field.type = field.LEAF
            dropped |= {child.id for child in manifest.fields if child.parent_id == field.id}
    kept = [f for f in manifest.fields if f.id not in dropped]
    del manifest.fields[:]
    manifest.fields.extend(kept)
    for fragment in manifest.fragments:
        for data_file in fragment.files:
            pairs = [(f, c) for f, c in zip(data_file.fields, data_file.column_indices) if f not in dropped]
            del data_file.fields[:], data_file.column_indices[:]
            data_file.fields.extend(f for f, _ in pairs)
            data_file.column_indices.extend(c for _, c in pairs)
            data_file.file_major_version, data_file.file_minor_version = 0, 3


def test_strings_stored_as_lists_of_bytes_by_lance_0_13(tmp_path):
    # Lance 0.13 (file version "0.3") stored a string column as list offsets plus a uint8 column
    # (official Lance's own tests keep such a table: historical_datasets/0.13.0_string_encoding)
    uri = str(tmp_path / "t")
    rows = 3000
    texts = [None if i % 7 == 3 else f"user-{i}@example.com/{'x' * (i % 40)}" for i in range(rows)]
    raw = [None if i % 5 == 0 else bytes([i % 256]) * (i % 9) for i in range(rows)]
    as_bytes = pa.list_(pa.uint8())
    table = pa.table({
        "n": pa.array(range(rows), pa.int64()),
        "s": pa.array([None if t is None else list(t.encode()) for t in texts], as_bytes),
        "b": pa.array([None if b is None else list(b) for b in raw], pa.large_list(pa.uint8())),
        "m": pa.array(range(rows, 2 * rows), pa.int64()),
    })
    lance.write_dataset(table, uri, data_storage_version="2.0", max_rows_per_file=1000, max_rows_per_group=256)
    _edit_latest_manifest(uri, lambda m: _strings_as_lance_0_13(m, {"s": "string", "b": "large_binary"}))
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    expected = pa.table({"n": table["n"], "s": pa.array(texts), "b": pa.array(raw, pa.large_binary()), "m": table["m"]})
    assert theirs.to_table().equals(expected)  # official Lance reads the layout as we build it
    assert ours.schema == theirs.schema
    assert ours.to_table().equals(expected)
    rows_wanted = [2999, 0, 1500, 3, 999, 1000, 1001]
    assert ours.take(rows_wanted).equals(theirs.take(rows_wanted))
    assert ours.to_table(columns=["s"], filter="n >= 990 AND n < 1010").equals(
        theirs.to_table(columns=["s"], filter="n >= 990 AND n < 1010"))
    batches = list(ours.to_batches(batch_size=333, columns=["b", "s"]))
    assert pa.Table.from_batches(batches).equals(expected.select(["b", "s"]))
