"""Corrupt 2.1/2.2 files raise CorruptFileError naming the file and the column, never wrong data."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as PyWriter

from lance_format.errors import CorruptFileError, UnsupportedFeatureError
from lance_format.file import ColumnPlan
from lance_format.file.container import build_tail, encoding_bytes, pack_any, read_file_metadata, unpack_any
from lance_format.file.plans import structural_plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.proto import file2_pb2

REL = "f.lance"
COLUMNS = ["i", "s", "l", "long", "vec", "cat", "const"]


def _table(n: int = 3000) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table({
        "i": pa.array(rng.integers(0, 10**9, n)),
        "s": pa.array([None if i % 9 == 0 else f"str{i}" for i in range(n)]),
        "l": pa.array([[i] * (i % 3) if i % 7 else None for i in range(n)], pa.list_(pa.int32())),
        "long": pa.array([None if i % 5 == 0 else f"{i}" + "z" * 700 for i in range(n)]),
        "vec": pa.array([rng.random(128).astype(np.float32) for _ in range(n)], pa.list_(pa.float32(), 128)),
        "cat": pa.array([["red", "green", "blue"][i % 3] for i in range(n)]),
        "const": pa.array(["same"] * n),
    })


@pytest.fixture(params=["2.1", "2.2"])
def written(tmp_path, request):
    table = _table()
    with PyWriter(str(tmp_path / REL), table.schema, version=request.param) as writer:
        writer.write_batch(table)
    assert [len(a) for a in _read_all(tmp_path)] == [3000] * len(COLUMNS)
    return tmp_path / REL


def _reader(tmp_path) -> LanceFileReader:
    return LanceFileReader(ObjectStore(tmp_path), REL)


def _read_all(tmp_path) -> list[pa.Array]:
    with _reader(tmp_path) as r:
        return r.read_range(structural_plans_for_schema(r.lance_schema()), 0, r.num_rows)


def _expect_corrupt(tmp_path, column: str | None) -> CorruptFileError:
    with pytest.raises(CorruptFileError) as info:
        _read_all(tmp_path)
    assert info.value.path == REL and REL in str(info.value)
    if column is not None:
        assert info.value.column == column, str(info.value)
    return info.value


def _leaf_column(name: str) -> int:
    return COLUMNS.index(name)


def _rewrite(path, mutate) -> None:
    """Re-serialize the file's metadata after ``mutate(columns, descriptor)`` changed it."""
    data = path.read_bytes()
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, len(data), path=REL)
    mutate(meta.columns, meta.descriptor)
    position = meta.global_buffers[0][0]
    path.write_bytes(data[:position] + build_tail(position, meta.descriptor, meta.columns, version=meta.version))


def _edit_layout(path, column: int, edit) -> None:
    def mutate(columns, _descriptor):
        page = columns[column].pages[0]
        layout = unpack_any(page.encoding.direct.encoding, pb.PageLayout)
        edit(layout)
        page.encoding.direct.encoding = pack_any(layout)
    _rewrite(path, mutate)


def _page_buffer(path, column: int, buffer: int) -> tuple[int, int]:
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, f.size(), path=REL)
    page = meta.columns[column].pages[0]
    return page.buffer_offsets[buffer], page.buffer_sizes[buffer]


def _patch(path, offset: int, payload: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + len(payload)] = payload
    path.write_bytes(bytes(data))


# -- container and metadata ------------------------------------------------------------------------


def test_truncated_file(tmp_path, written):
    written.write_bytes(written.read_bytes()[:-100])
    with pytest.raises(CorruptFileError) as info:
        _reader(tmp_path)
    assert info.value.path == REL


def test_page_buffer_outside_the_data_region(tmp_path, written):
    def mutate(columns, _d):
        columns[_leaf_column("s")].pages[0].buffer_sizes[1] += 10**9
    _rewrite(written, mutate)
    _expect_corrupt(tmp_path, "s")


def test_undecodable_page_protobuf(tmp_path, written):
    def mutate(columns, _d):
        page = columns[_leaf_column("l")].pages[0]
        page.encoding.direct.encoding = pack_any(pb.PageLayout())[:-2] + b"\xff\xff\xff"
    _rewrite(written, mutate)
    _expect_corrupt(tmp_path, "l.item")


def test_wrong_encoding_type(tmp_path, written):
    def mutate(columns, _d):
        columns[_leaf_column("i")].pages[0].encoding.direct.encoding = pack_any(file2_pb2.ColumnMetadata())
    _rewrite(written, mutate)
    _expect_corrupt(tmp_path, "i")


def test_page_lengths_disagree_with_the_file(tmp_path, written):
    def mutate(columns, _d):
        columns[_leaf_column("vec")].pages[0].length += 1
    _rewrite(written, mutate)
    _expect_corrupt(tmp_path, "vec")


# -- mini-block ---------------------------------------------------------------------------------------


def test_bad_chunk_metadata(tmp_path, written):
    offset, size = _page_buffer(written, _leaf_column("i"), 0)
    _patch(written, offset, b"\xf0\xff" * (size // 2))
    _expect_corrupt(tmp_path, "i")


def test_bad_item_count(tmp_path, written):
    _edit_layout(written, _leaf_column("s"), lambda layout: setattr(layout.mini_block_layout, "num_items", 2999))
    _expect_corrupt(tmp_path, "s")


def test_garbage_chunk_header(tmp_path, written):
    offset, _ = _page_buffer(written, _leaf_column("s"), 1)
    _patch(written, offset, b"\xff\x7f\xff\x7f\xff\x7f")
    _expect_corrupt(tmp_path, "s")


def test_wrong_number_of_value_buffers(tmp_path, written):
    _edit_layout(written, _leaf_column("i"), lambda layout: setattr(layout.mini_block_layout, "num_buffers", 2))
    _expect_corrupt(tmp_path, "i")


def test_bad_repetition_index(tmp_path, written):
    column = _leaf_column("l")
    with pa.OSFile(str(written)) as f:
        meta = read_file_metadata(f, f.size(), path=REL)
    page = meta.columns[column].pages[0]
    offset, size = page.buffer_offsets[-1], page.buffer_sizes[-1]
    _patch(written, offset, np.full(size // 8, 10**6, np.uint64).tobytes())
    _expect_corrupt(tmp_path, "l.item")


def test_layers_that_contradict_the_levels(tmp_path, written):
    def edit(layout):
        del layout.mini_block_layout.layers[:]
        layout.mini_block_layout.layers.append(pb.REPDEF_ALL_VALID_ITEM)
    _edit_layout(written, _leaf_column("l"), edit)
    _expect_corrupt(tmp_path, "l.item")


def test_layers_that_contradict_the_schema(tmp_path, written):
    r = _reader(tmp_path)
    with pytest.raises(CorruptFileError, match="layers") as info:
        r.read_range([ColumnPlan(pa.field("l", pa.list_(pa.list_(pa.int32()))), -1,
                                 [ColumnPlan(pa.field("item", pa.list_(pa.int32())), -1,
                                             [ColumnPlan(pa.field("item", pa.int32()), _leaf_column("l"))])])], 0, 10)
    assert info.value.path == REL


def test_dictionary_size_mismatch(tmp_path, written):
    column = _leaf_column("cat")
    with pa.OSFile(str(written)) as f:
        meta = read_file_metadata(f, f.size(), path=REL)
        layout = unpack_any(encoding_bytes(meta.columns[column].pages[0].encoding, f, path=REL, column=None),
                            pb.PageLayout)
    assert layout.mini_block_layout.HasField("dictionary")
    _edit_layout(written, column, lambda layout: setattr(layout.mini_block_layout, "num_dictionary_items", 1000))
    _expect_corrupt(tmp_path, "cat")


# -- full-zip and constant ---------------------------------------------------------------------------


def test_bad_full_zip_repetition_index(tmp_path, written):
    offset, size = _page_buffer(written, _leaf_column("long"), 1)
    _patch(written, offset + size // 2, b"\xff" * 8)
    _expect_corrupt(tmp_path, "long")


def test_truncated_full_zip_values(tmp_path, written):
    def mutate(columns, _d):
        columns[_leaf_column("vec")].pages[0].buffer_sizes[0] -= 700
    _rewrite(written, mutate)
    _expect_corrupt(tmp_path, "vec")


def test_bad_fsst_symbol_table(tmp_path, written):
    def edit(layout):
        values = layout.full_zip_layout.value_compression
        assert values.WhichOneof("compression") == "fsst"
        values.fsst.symbol_table = b"\0" * len(values.fsst.symbol_table)
    _edit_layout(written, _leaf_column("long"), edit)
    _expect_corrupt(tmp_path, "long")


def test_constant_value_buffer_damaged(tmp_path, written):
    offset, _ = _page_buffer(written, _leaf_column("const"), 0)
    _patch(written, offset, b"\x09\x00\x00\x00")
    _expect_corrupt(tmp_path, "const")


def test_newer_file_version_is_refused(tmp_path, written):
    data = bytearray(written.read_bytes())
    data[-6:-4] = (3).to_bytes(2, "little")
    written.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFeatureError, match="2.3") as info:
        _reader(tmp_path)
    assert info.value.path == REL
