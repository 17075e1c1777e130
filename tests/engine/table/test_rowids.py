"""Row-id and row-version sequences: hand-built protos, Lance's segment choice, pylance as oracle."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.io.object_store import ObjectStore
from lance_format.proto import rowids_pb2, table_pb2
from lance_format.table import row_versions as rv
from lance_format.table.deletion import read_deletion_file
from lance_format.table.row_versions import read_created_at, read_last_updated_at
from lance_format.table.rowids import (
    decode_row_ids,
    encode_row_ids,
    extend_segments,
    parse_row_id_segments,
    read_row_ids,
    rechunk_row_ids,
    serialize_row_id_segments,
)
from lance_format.table.u64_segment import U64Segment

U64 = np.uint64


def seq(*segments: dict) -> bytes:
    return rowids_pb2.RowIdSequence(segments=list(segments)).SerializeToString()


def ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=U64)


# -- decoding hand-built protos ----------------------------------------------------------------
def test_range_bytes_match_pylance():
    assert encode_row_ids(np.arange(10)) == bytes.fromhex("0a040a02100a")
    np.testing.assert_array_equal(decode_row_ids(bytes.fromhex("0a040a02100a")), np.arange(10))


def test_decode_every_segment_kind_and_width():
    holes16 = {"u16_array": {"base": 103, "offsets": np.array([0, 2], "<u2").tobytes()}}
    sorted32 = {"u32_array": {"base": 7, "offsets": np.array([0, 70000], "<u4").tobytes()}}
    big = [2**40, 3, 2**63 + 5]
    array64 = {"u64_array": {"values": np.array(big, "<u8").tobytes()}}
    array16 = {"u16_array": {"base": 1000, "offsets": np.array([5, 0, 65535], "<u2").tobytes()}}
    data = seq(
        {"range": {"start": 0, "end": 3}},
        {"range_with_holes": {"start": 100, "end": 108, "holes": holes16}},
        {"range_with_bitmap": {"start": 200, "end": 211, "bitmap": bytes([0b00000101, 0b00000100])}},
        {"sorted_array": sorted32},
        {"array": array64},
        {"array": array16},
    )
    expected = [0, 1, 2, 100, 101, 102, 104, 106, 107, 200, 202, 210, 7, 70007, *big, 1005, 1000, 66535]
    np.testing.assert_array_equal(decode_row_ids(data), np.array(expected, dtype=U64))
    # Parsing and re-serializing keeps every byte (widths and bases included).
    assert serialize_row_id_segments(parse_row_id_segments(data)) == data


def test_bitmap_is_lsb_first():
    # pylance v3 update fragment: RangeWithBitmap[2,13) bitmap 01 04 = {2, 12}
    data = bytes.fromhex("0a0a1a080802100d1a020104")
    np.testing.assert_array_equal(decode_row_ids(data), ids(2, 12))
    assert encode_row_ids(ids(2, 12)) == data
    assert encode_row_ids(ids(3, 15)) == bytes.fromhex("0a0a1a08080310101a020110")


def test_empty_variants_are_still_written():
    # Range[0,0) and an empty u64 array must appear on the wire, as prost writes `Some(..)`.
    segs = [U64Segment.range(0, 0), U64Segment.from_values(np.zeros(0, dtype=U64))]
    data = serialize_row_id_segments(segs)
    assert data == bytes.fromhex("0a020a00") * 2
    assert [s.kind for s in parse_row_id_segments(data)] == ["range", "range"]
    assert encode_row_ids(np.zeros(0, dtype=U64)) == b""
    assert decode_row_ids(b"").size == 0


def test_large_range_decodes_vectorized():
    data = encode_row_ids(np.arange(5, 10_000_005, dtype=U64))
    assert len(data) < 16
    out = decode_row_ids(data, num_rows=10_000_000)
    assert out.dtype == U64 and out[0] == 5 and out[-1] == 10_000_004


# -- Lance's segment choice (U64Segment::from_slice) -------------------------------------------
def kinds(values) -> list[tuple[str, int | None]]:
    out = []
    for s in parse_row_id_segments(encode_row_ids(np.asarray(values, dtype=U64))):
        enc = s.array or s.holes
        out.append((s.kind, enc.width if enc else None))
    return out


@pytest.mark.parametrize(
    "values, expected",
    [
        ([42], [("range", None)]),
        (range(100, 200), [("range", None)]),
        ([x for x in range(1000) if x != 100], [("range_with_holes", 16)]),
        (range(0, 1000, 2), [("range_with_bitmap", None)]),
        (range(0, 100_000, 100), [("sorted_array", 32)]),
        (range(0, 60_000, 100), [("sorted_array", 16)]),
        ([0, 2**33], [("sorted_array", 64)]),
        ([5, 3, 9], [("array", 16)]),
        ([70_000, 0], [("array", 32)]),
        ([2**32, 0], [("array", 64)]),
        ([0xFFFF, 0], [("array", 16)]),
        ([0x10000, 0], [("array", 32)]),
    ],
)
def test_segment_choice(values, expected):
    values = np.array(list(values), dtype=U64)
    assert kinds(values) == expected
    np.testing.assert_array_equal(decode_row_ids(encode_row_ids(values)), values)


def test_segment_choice_ties():
    # holes (24+4*1) == bitmap (24+ceil(32/8)): holes wins.
    assert kinds([x for x in range(32) if x != 5]) == [("range_with_holes", 16)]
    # bitmap (24+ceil(64/8)) == sorted array (24+2*4), holes far bigger: bitmap wins.
    assert kinds([0, 1, 2, 63]) == [("range_with_bitmap", None)]


def test_holes_base_is_first_hole():
    (seg,) = parse_row_id_segments(encode_row_ids(np.array([x for x in range(1000) if x != 100], U64)))
    assert (seg.start, seg.end, seg.holes.base, list(seg.holes.offsets)) == (0, 1000, 100, [0])


def test_bad_row_ids_rejected():
    for bad in (ids(1, 2, 2, 3), np.array([3, -1]), np.array([1.0, 2.0])):
        with pytest.raises(InvalidInputError):
            encode_row_ids(bad)


def test_batch_lengths_and_range_fusion():
    values = np.arange(20, dtype=U64)
    assert encode_row_ids(values, [5, 10, 5]) == encode_row_ids(values)
    segs = extend_segments([U64Segment.range(0, 5)], [U64Segment.range(6, 8)])
    assert [(s.start, s.end) for s in segs] == [(0, 5), (6, 8)]
    with pytest.raises(InvalidInputError):
        encode_row_ids(values, [5])


def test_rechunk_masks_and_splits():
    a = encode_row_ids(np.arange(10, dtype=U64))
    b = encode_row_ids(np.arange(10, 15, dtype=U64))
    out = rechunk_row_ids([a, b], [np.array([2, 3, 5]), np.array([2])], [7, 4])
    np.testing.assert_array_equal(decode_row_ids(out[0]), ids(0, 1, 4, 6, 7, 8, 9))
    assert out[0] == bytes.fromhex("0a081a06100a1a02d303")  # pylance v7: RangeWithBitmap[0,10) d303
    np.testing.assert_array_equal(decode_row_ids(out[1]), ids(10, 11, 13, 14))
    # No deletions: touching Ranges fuse even across fragments.
    assert rechunk_row_ids([a, b], [None, None], [15]) == [encode_row_ids(np.arange(15))]
    with pytest.raises(InvalidInputError):
        rechunk_row_ids([a], [None], [11])
    with pytest.raises(InvalidInputError):
        rechunk_row_ids([a], [None], [9])
    with pytest.raises(InvalidInputError):
        rechunk_row_ids([a], [np.array([10])], [9])


# -- corrupt input -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data",
    [
        b"\x0a\x05\x0a",  # truncated
        seq({"range": {"start": 5, "end": 2}}),
        seq({}),  # no segment variant
        seq({"sorted_array": {}}),  # no array variant
        seq({"array": {"u16_array": {"offsets": b"\x01\x02\x03"}}}),
        seq({"array": {"u32_array": {"offsets": b"\x01\x02"}}}),
        seq({"array": {"u64_array": {"values": b"\x01" * 12}}}),
        seq({"array": {"u16_array": {"base": 2**64 - 2, "offsets": b"\x05\x00"}}}),
        seq({"range_with_bitmap": {"start": 0, "end": 20, "bitmap": b"\xff\xff"}}),
        seq({"range_with_holes": {"start": 0, "end": 10}}),
        seq({"range_with_holes": {"start": 0, "end": 10, "holes": {"u16_array": {"base": 10, "offsets": b"\0\0"}}}}),
        seq({"range_with_holes": {"start": 0, "end": 10, "holes": {"u16_array": {"base": 1, "offsets": b"\0\0\0\0"}}}}),
    ],
)
def test_corrupt_sequences(data):
    with pytest.raises(CorruptFileError):
        decode_row_ids(data)


def test_num_rows_checked_before_materializing():
    with pytest.raises(CorruptFileError, match="2000000000000 ids"):
        decode_row_ids(seq({"range": {"start": 0, "end": 2 * 10**12}}), num_rows=10)


# -- version sequences -------------------------------------------------------------------------
def test_version_sequence_bytes_and_runs():
    assert rv.encode_version_sequence(np.ones(10, dtype=U64)) == bytes.fromhex("0a080a040a02100a1001")
    assert rv.uniform_version_sequence(10, 1) == bytes.fromhex("0a080a040a02100a1001")
    data = bytes.fromhex("0a080a040a02100110010a0a0a060a04080110021002")  # pylance v3 created
    np.testing.assert_array_equal(rv.decode_version_sequence(data, 2), ids(1, 2))
    assert rv.encode_version_sequence(ids(1, 2)) == data
    assert rv.encode_version_sequence(np.zeros(0, U64)) == b"" == rv.uniform_version_sequence(0, 3)
    versions = ids(3, 3, 1, 1, 1, 7, 3)
    np.testing.assert_array_equal(rv.decode_version_sequence(rv.encode_version_sequence(versions)), versions)


def test_version_spans_count_only_as_lengths():
    runs = [
        rv.VersionRun(U64Segment.from_values(ids(0, 1, 4, 6, 7, 8, 9)), 1),  # bitmap span, 7 rows
        rv.VersionRun(U64Segment.from_values(ids(900, 5)), 4),  # array span, 2 rows
        rv.VersionRun(U64Segment.range(0, 0), 9),  # empty run
    ]
    data = rv.serialize_version_runs(runs)
    np.testing.assert_array_equal(rv.decode_version_sequence(data, 9), np.array([1] * 7 + [4] * 2, U64))
    with pytest.raises(CorruptFileError, match="covers 9 rows"):
        rv.decode_version_sequence(data, 10)
    with pytest.raises(CorruptFileError):
        rv.decode_version_sequence(rowids_pb2.RowDatasetVersionSequence(runs=[{"version": 3}]).SerializeToString())
    with pytest.raises(CorruptFileError):
        rv.decode_version_sequence(b"\x0a\x09garbage")


# -- reading from fragments (inline / external / absent) ---------------------------------------
def test_read_from_fragment(tmp_path: Path):
    store = ObjectStore(tmp_path)
    row_bytes = encode_row_ids(ids(4, 9, 11))
    created = rv.encode_version_sequence(ids(1, 1, 2))
    store.write_bytes("_rowids/blob.bin", b"junk" + row_bytes + created)
    frag = table_pb2.DataFragment(
        id=3,
        physical_rows=3,
        external_row_ids={"path": "_rowids/blob.bin", "offset": 4, "size": len(row_bytes)},
        external_created_at_versions={"path": "_rowids/blob.bin", "offset": 4 + len(row_bytes), "size": len(created)},
        inline_last_updated_at_versions=rv.uniform_version_sequence(3, 5),
    )
    np.testing.assert_array_equal(read_row_ids(store, frag), ids(4, 9, 11))
    np.testing.assert_array_equal(read_created_at(store, frag, 3), ids(1, 1, 2))
    np.testing.assert_array_equal(read_last_updated_at(store, frag, 3), ids(5, 5, 5))
    empty = table_pb2.DataFragment(id=1, physical_rows=3)
    assert read_row_ids(store, empty) is None and read_created_at(store, empty, 3) is None

    frag.external_row_ids.size += 100
    with pytest.raises(CorruptFileError, match="_rowids/blob.bin"):
        read_row_ids(store, frag)
    frag.external_row_ids.path = "_rowids/missing.bin"
    with pytest.raises(CorruptFileError, match="missing.bin"):
        read_row_ids(store, frag)
    bad = table_pb2.DataFragment(id=7, physical_rows=4, inline_row_ids=row_bytes)
    with pytest.raises(CorruptFileError, match="fragment 7"):
        read_row_ids(store, bad)
    with pytest.raises(CorruptFileError, match="fragment 3 created_at"):
        read_created_at(store, table_pb2.DataFragment(id=3, inline_created_at_versions=created), 5)


# -- pylance as the oracle ---------------------------------------------------------------------
def _manifest(root: Path, version: int) -> table_pb2.Manifest:
    data = (root / "_versions" / f"{2**64 - 1 - version:020d}.manifest").read_bytes()
    assert data[-4:] == b"LANC"
    (pos,) = struct.unpack("<q", data[-16:-8])
    (length,) = struct.unpack("<I", data[pos : pos + 4])
    manifest = table_pb2.Manifest()
    manifest.ParseFromString(data[pos + 4 : pos + 4 + length])
    return manifest


@pytest.fixture(scope="module")
def lineage_table(tmp_path_factory) -> Path:
    lance = pytest.importorskip("lance")
    root = tmp_path_factory.mktemp("lineage") / "t"

    def table(values) -> pa.Table:
        values = np.asarray(values, dtype=np.int64)
        return pa.table({"id": values, "v": values * 2})

    ds = lance.write_dataset(
        table(np.arange(100_000)), root, enable_stable_row_ids=True, data_storage_version="2.0", max_rows_per_file=40_000
    )
    ds = lance.write_dataset(table(np.arange(100_000, 100_010)), root, mode="append")
    ds.update({"v": "v + 1"}, where="id >= 1000 and id < 1200 and id != 1100")  # holes
    ds.update({"v": "v + 1"}, where="id % 3 = 0")  # batched bitmaps
    ds.update({"v": "v + 1"}, where="id % 1000 = 7")  # sorted arrays
    ds.delete("id % 7 = 1")
    src = np.random.default_rng(0).permutation(np.concatenate([np.arange(100, 70_000, 5), np.arange(90_000, 90_040)]))
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(table(src))  # array
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(table([5, 99_990, 10**8]))  # u32 sorted array
    ds.optimize.compact_files(target_rows_per_fragment=9_000)
    return root


def test_pylance_sequences_decode_and_reencode(lineage_table: Path):
    import lance

    ds = lance.dataset(lineage_table)
    store = ObjectStore(lineage_table)
    seen_kinds: set[tuple[str, int | None]] = set()
    for version in [v["version"] for v in ds.versions()]:
        manifest = _manifest(lineage_table, version)
        scan = ds.checkout_version(version).to_table(
            columns=["id", "_row_created_at_version", "_row_last_updated_at_version"],
            with_row_id=True,
            with_row_address=True,
        )
        addr = scan["_rowaddr"].to_numpy()
        for frag in manifest.fragments:
            n = frag.physical_rows
            row_ids = read_row_ids(store, frag)
            created = read_created_at(store, frag, n)
            updated = read_last_updated_at(store, frag, n)
            mine = (addr >> 32) == frag.id
            offsets = (addr[mine] & 0xFFFFFFFF).astype(np.int64)
            np.testing.assert_array_equal(row_ids[offsets], scan["_rowid"].to_numpy()[mine])
            np.testing.assert_array_equal(created[offsets], scan["_row_created_at_version"].to_numpy()[mine])
            np.testing.assert_array_equal(updated[offsets], scan["_row_last_updated_at_version"].to_numpy()[mine])
            if frag.HasField("deletion_file"):
                deleted = read_deletion_file(store, frag.id, frag.deletion_file)
                np.testing.assert_array_equal(np.setdiff1d(np.arange(n), offsets), deleted)

            # Every segment pylance wrote is what from_slice picks for its values.
            segments = parse_row_id_segments(frag.inline_row_ids)
            seen_kinds |= {(s.kind, (s.array or s.holes).width if (s.array or s.holes) else None) for s in segments}
            assert encode_row_ids(row_ids, [len(s) for s in segments]) == frag.inline_row_ids
            if all(len(r.span) == 0 or r.span.kind == "range" for r in rv.parse_version_runs(frag.inline_created_at_versions)):
                assert rv.encode_version_sequence(created) == frag.inline_created_at_versions
                assert rv.encode_version_sequence(updated) == frag.inline_last_updated_at_versions
    assert {("range", None), ("range_with_holes", 16), ("range_with_bitmap", None), ("sorted_array", 16),
            ("sorted_array", 32), ("array", 32)} <= seen_kinds


def test_compaction_rechunk_matches_pylance(lineage_table: Path):
    store = ObjectStore(lineage_table)
    versions = sorted(int(p.name.split(".")[0]) for p in (lineage_table / "_versions").glob("*.manifest"))
    final = _manifest(lineage_table, 2**64 - 1 - versions[0])
    before = _manifest(lineage_table, final.version - 2)  # compaction = ReserveFragments + Rewrite
    old = list(before.fragments)
    kept = {f.id for f in old} & {f.id for f in final.fragments}
    old = [f for f in old if f.id not in kept]
    new = [f for f in final.fragments if f.id not in kept]
    # Tasks take consecutive fragments and their outputs are listed in order, and no output
    # mixes two tasks, so one stream over all rewritten fragments gives the same chunks.
    deletions = [read_deletion_file(store, f.id, f.deletion_file) if f.HasField("deletion_file") else None for f in old]
    sizes = [f.physical_rows for f in new]
    assert len(new) > 1 and any(d is not None for d in deletions)
    assert rechunk_row_ids([f.inline_row_ids for f in old], deletions, sizes) == [f.inline_row_ids for f in new]
    for field in ("inline_created_at_versions", "inline_last_updated_at_versions"):
        got = rv.rechunk_version_sequences([getattr(f, field) for f in old], deletions, sizes)
        assert got == [getattr(f, field) for f in new]
