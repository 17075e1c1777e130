"""Failure paths of the 2.0 file reader and writer: corrupt files, unsupported versions and types."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as PyWriter

from lance_format.errors import CorruptFileError, SchemaMismatchError, UnsupportedFeatureError
from lance_format.file.container import build_tail, read_file_metadata
from lance_format.file.plans import plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.schema import LanceSchema
from tests.engine.file.test_file_v2_0 import write_ours

REL = "data/f.lance"


def _table(n: int = 500) -> pa.Table:
    return pa.table(
        {
            "i": pa.array(np.arange(n)),
            "s": pa.array([None if i % 9 == 0 else f"str{i}" for i in range(n)]),
            "l": pa.array([[i] * (i % 3) if i % 7 else None for i in range(n)], pa.list_(pa.int32())),
        }
    )


def _read_all(tmp_path, rel: str = REL):
    reader = LanceFileReader(ObjectStore(tmp_path), rel)
    with reader:
        return reader.read_range(plans_for_schema(reader.lance_schema()), 0, reader.num_rows)


def _rewrite_metadata(tmp_path, mutate) -> None:
    """Re-serialize the file's metadata after ``mutate(columns, descriptor)`` changed it."""
    path = tmp_path / REL
    data = path.read_bytes()
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, len(data), path=REL)
    mutate(meta.columns, meta.descriptor)
    position = meta.global_buffers[0][0]
    path.write_bytes(data[:position] + build_tail(position, meta.descriptor, meta.columns))


@pytest.fixture
def written(tmp_path):
    assert write_ours(tmp_path, _table(), name="f.lance", max_page_bytes=1024) == REL
    assert [len(a) for a in _read_all(tmp_path)] == [500, 500, 500]
    return tmp_path / REL


def _expect_corrupt(tmp_path, column: str | None = None) -> CorruptFileError:
    with pytest.raises(CorruptFileError) as info:
        _read_all(tmp_path)
    assert info.value.path == REL and REL in str(info.value)
    if column is not None:
        assert info.value.column == column, str(info.value)
    return info.value


@pytest.mark.parametrize("keep", [0, 3, 39, -1, -41, -500])
def test_truncated_file(tmp_path, written, keep):
    data = written.read_bytes()
    written.write_bytes(data[:keep] if keep >= 0 else data[:keep])
    _expect_corrupt(tmp_path)


def test_data_cut_out_of_the_middle(tmp_path, written):
    data = written.read_bytes()
    written.write_bytes(data[:100] + data[1100:])
    _expect_corrupt(tmp_path)


def test_bad_magic(tmp_path, written):
    written.write_bytes(written.read_bytes()[:-4] + b"LANX")
    assert "magic" in str(_expect_corrupt(tmp_path))


def test_footer_offsets_past_eof(tmp_path, written):
    data = bytearray(written.read_bytes())
    struct.pack_into("<Q", data, len(data) - 40, len(data) + 100)  # column_meta_start
    written.write_bytes(bytes(data))
    _expect_corrupt(tmp_path)
    struct.pack_into("<Q", data, len(data) - 40, 0)
    struct.pack_into("<Q", data, len(data) - 24, 2**60)  # gbo table start
    written.write_bytes(bytes(data))
    _expect_corrupt(tmp_path)


def test_undecodable_column_metadata(tmp_path, written):
    data = bytearray(written.read_bytes())
    cm_start, cmo_start = struct.unpack_from("<QQ", data, len(data) - 40)
    data[cm_start : cm_start + 12] = b"\xff" * 12
    written.write_bytes(bytes(data))
    assert "column metadata" in str(_expect_corrupt(tmp_path))


def test_undecodable_file_descriptor(tmp_path, written):
    data = bytearray(written.read_bytes())
    gbo_start = struct.unpack_from("<Q", data, len(data) - 24)[0]
    pos, size = struct.unpack_from("<QQ", data, gbo_start)
    data[pos : pos + size] = b"\xff" * size
    written.write_bytes(bytes(data))
    _expect_corrupt(tmp_path)


def test_page_buffer_out_of_range(tmp_path, written):
    def mutate(columns, descriptor):
        columns[1].pages[0].buffer_offsets[1] = 10**9

    _rewrite_metadata(tmp_path, mutate)
    _expect_corrupt(tmp_path, column="s")


def test_page_lengths_do_not_add_up(tmp_path, written):
    _rewrite_metadata(tmp_path, lambda columns, d: setattr(columns[0].pages[0], "length", columns[0].pages[0].length + 1))
    _expect_corrupt(tmp_path, column="i")


def test_list_items_do_not_add_up(tmp_path, written):
    def mutate(columns, descriptor):
        columns[3].pages[0].length += 1  # the item column of "l"

    _rewrite_metadata(tmp_path, mutate)
    _expect_corrupt(tmp_path, column="item")


def test_short_page_buffer(tmp_path, written):
    _rewrite_metadata(tmp_path, lambda columns, d: columns[0].pages[0].buffer_sizes.__setitem__(0, 8))
    assert "bytes" in str(_expect_corrupt(tmp_path, column="i"))


def test_garbage_offsets(tmp_path, written):
    data = bytearray(written.read_bytes())
    with pa.OSFile(str(written)) as f:
        meta = read_file_metadata(f, len(data), path=REL)
    for column in (1, 2):  # string offsets, then list offsets
        page = meta.columns[column].pages[0]
        spoiled = bytearray(data)
        start = page.buffer_offsets[0]
        spoiled[start : start + 64] = np.full(8, 2**40, np.uint64).tobytes()
        written.write_bytes(bytes(spoiled))
        _expect_corrupt(tmp_path, column=["s", "l"][column - 1])


def test_bad_page_encoding(tmp_path, written):
    _rewrite_metadata(tmp_path, lambda columns, d: columns[0].pages[0].encoding.direct.__setattr__("encoding", b"\x0a\x03abc\x12\x02\xff\xff"))
    _expect_corrupt(tmp_path, column="i")


def test_num_rows_mismatch(tmp_path, written):
    _rewrite_metadata(tmp_path, lambda columns, d: setattr(d, "length", d.length + 5))
    _expect_corrupt(tmp_path)


# -- versions --------------------------------------------------------------------------------


@pytest.mark.parametrize("version, minor", [("2.1", 1), ("2.2", 2)])
def test_newer_file_versions_open_and_unknown_ones_are_refused(tmp_path, version, minor):
    # 2.1/2.2 are read by the structural reader (tests/test_file_v2_1_read*.py); 2.3 is refused
    (tmp_path / "data").mkdir()
    with PyWriter(str(tmp_path / REL), version=version) as writer:
        writer.write_batch(_table(10))
    with LanceFileReader(ObjectStore(tmp_path), REL) as reader:
        assert reader.version == (2, minor) and reader.num_rows == 10
    data = bytearray((tmp_path / REL).read_bytes())
    struct.pack_into("<HH", data, len(data) - 8, 2, 3)
    (tmp_path / REL).write_bytes(bytes(data))
    with pytest.raises(UnsupportedFeatureError, match="file version 2.3 is not supported") as info:
        LanceFileReader(ObjectStore(tmp_path), REL)
    assert info.value.path == REL


def test_legacy_file_is_refused(tmp_path, written):
    data = bytearray(written.read_bytes())
    struct.pack_into("<HH", data, len(data) - 8, 0, 2)
    written.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFeatureError, match="legacy"):
        LanceFileReader(ObjectStore(tmp_path), REL)


# -- writer refusals ---------------------------------------------------------------------------


def _writer(tmp_path, schema: pa.Schema, **kwargs) -> LanceFileWriter:
    return LanceFileWriter(ObjectStore(tmp_path), REL, LanceSchema.from_arrow(schema), **kwargs)


def test_struct_nulls_are_refused(tmp_path):
    data = pa.table({"st": pa.array([{"a": 1}, None])})
    writer = _writer(tmp_path, data.schema)
    with pytest.raises(UnsupportedFeatureError, match="struct validity") as info:
        writer.write_batch(data.to_batches()[0])
    assert info.value.column == "st" and info.value.path == REL
    writer.abort()
    assert not (tmp_path / REL).exists()


def test_nested_struct_nulls_inside_list_are_refused(tmp_path):
    data = pa.table({"l": pa.array([[{"a": 1}, None]], pa.list_(pa.struct([("a", pa.int32())])))})
    writer = _writer(tmp_path, data.schema)
    with pytest.raises(UnsupportedFeatureError, match="struct validity") as info:
        writer.write_batch(data.to_batches()[0])
    assert info.value.column == "l.item"


def test_fixed_size_list_of_struct_is_refused(tmp_path):
    schema = pa.schema([("f", pa.list_(pa.struct([("a", pa.int32())]), 2))])
    with pytest.raises(UnsupportedFeatureError, match="fixed_size_list of struct"):
        _writer(tmp_path, schema)
    assert not (tmp_path / REL).exists()


def test_fixed_size_list_of_strings_is_refused(tmp_path):
    with pytest.raises(UnsupportedFeatureError, match="fixed_size_list"):
        _writer(tmp_path, pa.schema([("f", pa.list_(pa.string(), 2))]))


@pytest.mark.parametrize("version", ["2.3", "next", "0.1"])
def test_other_write_versions_are_refused(tmp_path, version):
    with pytest.raises(UnsupportedFeatureError):
        _writer(tmp_path, pa.schema([("i", pa.int32())]), version=version)


def test_batch_must_match_schema(tmp_path):
    writer = _writer(tmp_path, pa.schema([("i", pa.int32())]))
    with pytest.raises(SchemaMismatchError):
        writer.write_batch(pa.record_batch([pa.array([1], pa.int64())], names=["i"]))
    with pytest.raises(SchemaMismatchError):
        writer.write_batch(pa.record_batch([pa.array([1], pa.int32()), pa.array([1])], names=["i", "j"]))
    writer.abort()


def test_abort_deletes_partial_file(tmp_path):
    writer = _writer(tmp_path, pa.schema([("i", pa.int64())]), max_page_bytes=64)
    writer.write_batch(pa.record_batch([pa.array(np.arange(1000))], names=["i"]))
    assert (tmp_path / REL).exists()
    writer.abort()
    assert not (tmp_path / REL).exists()


def test_bad_take_and_range_arguments(tmp_path, written):
    reader = LanceFileReader(ObjectStore(tmp_path), REL)
    plans = plans_for_schema(reader.lance_schema())
    with pytest.raises(ValueError):
        reader.read_range(plans, 10, 501)
    with pytest.raises(ValueError):
        reader.take(plans, np.array([1, 500], np.uint64))


@pytest.mark.parametrize("region", ["data", "metadata"])
def test_random_corruption_raises_only_typed_errors(tmp_path, written, region):
    """Flipped bytes give a typed error or a successful read, never a crash of another kind."""
    import random

    from lance_format.errors import LanceError

    original = written.read_bytes()
    gbo_start = struct.unpack_from("<Q", original, len(original) - 24)[0]
    metadata_start = struct.unpack_from("<Q", original, gbo_start)[0]
    lo, hi = (0, metadata_start) if region == "data" else (metadata_start, len(original))
    rng = random.Random(5)
    for _ in range(150):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(lo, hi)] = rng.randrange(256)
        written.write_bytes(bytes(data))
        try:
            reader = LanceFileReader(ObjectStore(tmp_path), REL)
            plans = plans_for_schema(reader.lance_schema())
            reader.read_range(plans, 0, reader.num_rows)
            reader.take(plans, np.array([7, 3, 3, 0]))
        except LanceError:
            pass
