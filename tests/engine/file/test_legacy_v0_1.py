"""Tables official Lance writes with the legacy file format (0.1) read here as pylance reads them.

Legacy files store no validity: pylance reads nulls back as the bytes under them (and empty
var-binary values of nullable fields as null), so every comparison is against pylance's own
read, not against the data written.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import CorruptFileError
from lance_format.table.manifest import decode_manifest, encode_manifest
from tests.compat import assert_same_history, assert_same_version, assert_tables_equal
from tests.type_matrix import type_matrix


def _write_legacy(table: pa.Table, uri: str, **kwargs) -> lance.LanceDataset:
    return lance.write_dataset(table, uri, data_storage_version="legacy", **kwargs)


@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_type_matrix_reads_like_pylance(tmp_path, nulls):
    uri = str(tmp_path / "t")
    _write_legacy(type_matrix(300, nulls=nulls), uri, max_rows_per_file=120, max_rows_per_group=50)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.data_storage_version == "0.1"
    assert {f.file_minor_version for frag in ours.get_fragments() for f in frag.data_files()} == {2}
    assert_same_version(uri, 1)
    cols = ["list_struct", "int8", "dict", "string", "vector"]
    assert_tables_equal(ours.to_table(columns=cols, limit=50, offset=100),
                        theirs.to_table(columns=cols, limit=50, offset=100))
    idx = [299, 0, 5, 121, 240, 7, 7, 49, 50, 51]
    assert_tables_equal(ours.take(idx), theirs.take(idx))
    # (not "IS NULL" on var-binary columns: pylance prunes legacy pages by their write-time null
    # counts, which disagree with its own read of empty values as nulls)
    for flt in ["int32 > 0", "string LIKE 's1%'", "int8 IN (1, 2, 3) OR bool", "large_string = 'L1'",
                "NOT (uint16 BETWEEN 100 AND 600)"]:
        assert ours.count_rows(flt) == theirs.count_rows(flt), flt
        assert_tables_equal(ours.to_table(columns=["int32", "string"], filter=flt, with_row_id=True),
                            theirs.to_table(columns=["int32", "string"], filter=flt, with_row_id=True), flt)


def test_nulls_read_as_pylance_reads_them(tmp_path):
    # the legacy format drops validity; both engines must agree on what comes back
    uri = str(tmp_path / "t")
    table = pa.table({
        "i": pa.array([1, None, 3], pa.int32()),
        "s": pa.array(["a", None, ""]),
        "l": pa.array([[1], None, []], pa.list_(pa.int64())),
    })
    _write_legacy(table, uri)
    ours = lance_format.dataset(uri).to_table()
    assert_tables_equal(ours, lance.dataset(uri).to_table())
    assert ours.column("i").null_count == 0
    assert ours.column("s").to_pylist() == ["a", None, None]  # empty strings of a nullable field are null
    assert ours.column("l").to_pylist() == [[1], [], []]


def test_more_legacy_types(tmp_path):
    n = 500
    words = pa.array(["", "a", "bb", "ccc"])
    columns = {
        "dict_in_struct": pa.StructArray.from_arrays(
            [pa.DictionaryArray.from_arrays(pa.array(np.arange(n) % 4, pa.int8()), words), pa.array(range(n))],
            ["d", "i"]),
        "dict_u16": pa.DictionaryArray.from_arrays(pa.array(np.arange(n) % 4, pa.uint16()), words),
        "dict_int_values": pa.DictionaryArray.from_arrays(pa.array(np.arange(n) % 3, pa.int32()),
                                                          pa.array([10, 20, 30], pa.int64())),
        "list_dict": pa.ListArray.from_arrays(
            pa.array(np.arange(n + 1) * 2, pa.int32()),
            pa.DictionaryArray.from_arrays(pa.array(np.arange(2 * n) % 4, pa.int32()), words)),
        "fsl_bool": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(3 * n) % 3 == 0), 3),
        "fsl_fsl": pa.FixedSizeListArray.from_arrays(
            pa.FixedSizeListArray.from_arrays(pa.array(np.arange(4 * n, dtype=np.int16)), 2), 2),
        "null": pa.nulls(n),
        "list_fsl": pa.ListArray.from_arrays(
            pa.array(np.arange(n + 1), pa.int32()),
            pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * n, dtype=np.float64)), 2)),
        "large_list_str": pa.LargeListArray.from_arrays(pa.array(np.arange(n + 1), pa.int64()),
                                                        pa.array(["", "x"] * (n // 2))),
    }
    uri = str(tmp_path / "t")
    _write_legacy(pa.table(columns), uri, max_rows_per_group=64)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.schema == theirs.schema
    assert_tables_equal(ours.to_table(), theirs.to_table())
    idx = [499, 3, 64, 65, 200, 3]
    # pylance panics taking a fixed-size list of bools from a legacy file; compare without it
    cols = [c for c in columns if c != "fsl_bool"]
    assert_tables_equal(ours.take(idx, columns=cols), theirs.take(idx, columns=cols))
    assert ours.take(idx, columns=["fsl_bool"]).column(0).to_pylist() == (
        ours.to_table(columns=["fsl_bool"]).column(0).take(pa.array(idx)).to_pylist())


def test_non_nullable_empty_values_stay_empty(tmp_path):
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("s", pa.string(), nullable=False), pa.field("b", pa.large_binary(), nullable=False)])
    _write_legacy(pa.table({"s": ["", "a", ""], "b": [b"", b"x", b""]}, schema=schema), uri)
    ours = lance_format.dataset(uri).to_table()
    assert_tables_equal(ours, lance.dataset(uri).to_table())
    assert ours.column("s").to_pylist() == ["", "a", ""]


def test_many_batches_sequential_reads_and_takes(tmp_path):
    uri = str(tmp_path / "t")
    n = 20_000
    rng = np.random.default_rng(3)
    table = pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "s": pa.array([f"v{i % 101}" * (i % 4) for i in range(n)]),
        "l": pa.array([list(range(i % 5)) for i in range(n)], pa.list_(pa.int32())),
        "b": pa.array(rng.integers(0, 2, n).astype(bool)),
    })
    _write_legacy(table, uri, max_rows_per_file=12_000, max_rows_per_group=1000)
    lance.dataset(uri).delete("id % 7 = 3")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for batch_size in (333, 4096):
        got = pa.Table.from_batches(list(ours.to_batches(batch_size=batch_size)))
        assert_tables_equal(got, theirs.to_table())
    idx = rng.integers(0, ours.count_rows(), 500)
    assert_tables_equal(ours.take(idx), theirs.take(idx))


def test_pylance_mutation_history_on_a_legacy_table(tmp_path):
    uri = str(tmp_path / "t")
    table = type_matrix(400, nulls=True).append_column("key", pa.array(range(400), pa.int64()))
    ds = _write_legacy(table, uri, max_rows_per_file=150, max_rows_per_group=40)
    ds.delete("key % 9 = 4")
    ds = lance.write_dataset(table.slice(0, 30), uri, mode="append")
    ds.update({"int32_nulls": "int32_nulls + 1", "string": "'edited'"}, where="key > 300")
    ds.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(table.slice(10, 20))
    ds.add_columns({"k2": "key * 2"})
    ds.drop_columns(["int8"])
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    ds.delete("key % 50 = 1")
    assert {f.file_minor_version for frag in ds.get_fragments() for f in frag.data_files()} == {2}
    assert_same_history(uri)


def _rewrite_manifest(uri: str, edit) -> None:
    """Edit the latest manifest of ``uri`` in place (pylance-written, no dictionary fields)."""
    versions = Path(uri) / "_versions"
    path = min(versions.glob("*.manifest"), key=lambda p: p.name)  # V2 names: the latest sorts first
    mf = decode_manifest(path.read_bytes(), table=uri, path=str(path))
    edit(mf.manifest)
    path.write_bytes(encode_manifest(mf.manifest, mf.transaction, mf.index_section))


def test_row_counts_of_manifests_without_a_writer_version(tmp_path):
    # Lance < 0.8 wrote no writer_version and wrong or missing physical_rows; official Lance
    # then counts the rows of the first data file (the v0.8.0 table counted 92, not 82)
    uri = str(tmp_path / "t")
    _write_legacy(pa.table({"x": range(100)}), uri)
    lance.dataset(uri).delete("x >= 10 and x < 20")
    lance.write_dataset(pa.table({"x": range(2)}), uri, mode="append")

    def make_old(manifest):
        manifest.ClearField("writer_version")
        manifest.fragments[0].physical_rows = 90
        manifest.fragments[1].physical_rows = 0

    _rewrite_manifest(uri, make_old)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.count_rows() == theirs.count_rows() == 92
    assert_tables_equal(ours.to_table(with_row_id=True), theirs.to_table(with_row_id=True))
    # the version summary reports the manifest as written, like pylance
    assert ours.versions()[-1]["metadata"] == theirs.versions()[-1]["metadata"]


def _data_file(uri: str) -> Path:
    (path,) = (Path(uri) / "data").glob("*.lance")
    return path


def test_corrupt_legacy_files_name_the_file(tmp_path):
    uri = str(tmp_path / "t")
    _write_legacy(pa.table({"x": range(100), "s": [f"s{i}" for i in range(100)]}), uri)
    path = _data_file(uri)
    good = path.read_bytes()
    meta_pos = struct.unpack_from("<Q", good, len(good) - 16)[0]

    # metadata position past the end of the file
    path.write_bytes(good[:-16] + struct.pack("<QHH4s", len(good) + 10, 0, 2, b"LANC"))
    with pytest.raises(CorruptFileError, match=path.name):
        lance_format.dataset(uri).to_table()

    # a page table pointing a page past the data region
    (length,) = struct.unpack_from("<I", good, meta_pos)
    from lance_format.proto import file_pb2

    metadata = file_pb2.Metadata.FromString(good[meta_pos + 4 : meta_pos + 4 + length])
    table_pos = metadata.page_table_position
    bad = bytearray(good)
    struct.pack_into("<qq", bad, table_pos, table_pos + 5, 100)  # field 0, batch 0
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptFileError, match=path.name):
        lance_format.dataset(uri).to_table()

    # string positions that run backwards
    bad = bytearray(good)
    s_pos, _ = struct.unpack_from("<qq", good, table_pos + 16)  # field 1, batch 0
    struct.pack_into("<q", bad, s_pos + 8, 10**6)
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptFileError, match=path.name):
        lance_format.dataset(uri).to_table()

    # a truncated file
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(CorruptFileError, match=path.name):
        lance_format.dataset(uri).to_table()


def test_our_commits_keep_a_legacy_tables_dictionaries(tmp_path):
    # legacy manifests carry the dictionary values; every manifest we write must carry them on
    uri = str(tmp_path / "t")
    words = pa.array(["red", "", "blue"])
    table = pa.table({
        "k": pa.array(range(60), pa.int64()),
        "d": pa.DictionaryArray.from_arrays(pa.array(np.arange(60) % 3, pa.int32()), words),
        "s": pa.StructArray.from_arrays(
            [pa.DictionaryArray.from_arrays(pa.array(np.arange(60) % 2, pa.int8()), pa.array([7, 9], pa.int16()))],
            ["di"]),
    })
    _write_legacy(table, uri, max_rows_per_file=25)
    ours = lance_format.dataset(uri)
    ours.delete("k % 4 = 1")
    lance_format.dataset(uri).update_config({"note": "x"})
    lance_format.dataset(uri, version=1).restore()
    lance_format.dataset(uri).drop_columns(["k"])
    assert_same_history(uri)
    theirs = lance.dataset(uri)
    assert theirs.to_table().column("d").to_pylist()[:3] == ["red", None, "blue"]
    # and pylance commits on top of ours
    lance.dataset(uri).delete("d = 'blue'")
    assert_same_history(uri)


def test_old_manifest_with_a_missing_data_file_is_not_counted_as_empty(tmp_path):
    # without a trusted physical_rows the rows come from the data file; a missing file must
    # raise (official Lance fails too) rather than count 0 rows
    uri = str(tmp_path / "t")
    _write_legacy(pa.table({"x": range(10)}), uri)
    _rewrite_manifest(uri, lambda m: m.ClearField("writer_version"))
    path = _data_file(uri)
    path.unlink()
    with pytest.raises(CorruptFileError, match=path.name):
        lance_format.dataset(uri).count_rows()


def test_filters_on_legacy_row_groups_answer_as_a_full_scan(tmp_path):
    """pylance prunes (and wholly accepts) legacy row groups by the page statistics written with
    them, which leave NaN out: on a group holding a NaN it answers otherwise than it does for the
    same rows in a 2.x table (its full scan). We read every group, so filters answer the same on
    legacy and 2.x tables, and as pylance answers over the full 2.x scan (NaN above every number)."""
    x = np.linspace(0, 1, 3000)
    x[1500] = np.nan
    table = pa.table({"id": pa.array(range(3000), pa.int64()), "x": x})
    legacy, current = str(tmp_path / "legacy"), str(tmp_path / "current")
    _write_legacy(table, legacy, max_rows_per_group=100)
    lance.write_dataset(table, current, max_rows_per_group=100)
    full = lance_format.dataset(legacy).to_table()
    is_nan = pc.is_nan(full["x"])
    checks = {"x > 1": pc.or_(pc.greater(full["x"], 1.0), is_nan),
              "x < 2": pc.and_(pc.less(full["x"], 2.0), pc.invert(is_nan)),
              "NOT (x <= 1)": pc.or_(pc.invert(pc.less_equal(full["x"], 1.0)), is_nan)}
    for sql, mask in checks.items():
        expected = full.filter(mask)["id"].to_pylist()
        assert lance_format.dataset(legacy).to_table(filter=sql)["id"].to_pylist() == expected, sql
        assert lance_format.dataset(current).to_table(filter=sql)["id"].to_pylist() == expected, sql
        assert sorted(lance.dataset(current).to_table(filter=sql)["id"].to_pylist()) == expected, sql
    # pylance (NaN sorts above every number in its filters): its 2.x table has the NaN row in
    # "x > 1" and not in "x < 2"; on the legacy table the statistics (max 1.0) say the opposite
    theirs = {sql: [len(lance.dataset(uri).to_table(filter=sql)) for uri in (current, legacy)]
              for sql in ("x > 1", "x < 2")}
    assert theirs == {"x > 1": [1, 0], "x < 2": [2999, 3000]}
