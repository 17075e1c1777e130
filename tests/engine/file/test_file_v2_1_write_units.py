"""Units of the 2.1/2.2 writer: FastLanes packing, rep/def shredding, refusals, streaming."""

from __future__ import annotations

import importlib.util
import os
import struct

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.structural.encode_repdef import (
    ALL_VALID_ITEM,
    EMPTYABLE_LIST,
    NULL_AND_EMPTY_LIST,
    NULLABLE_ITEM,
    shred,
)
from lance_format.encodings.structural.fastlanes_pack import (
    BLOCK,
    FL_ORDER,
    inline_pack_chunks,
    out_of_line_pack,
    pack_blocks,
    unpack_blocks,
)
from lance_format.errors import SchemaMismatchError, UnsupportedFeatureError
from lance_format.file.container import read_file_metadata, unpack_any
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceSchema

# -- FastLanes -------------------------------------------------------------------------------------


def _reference_pack(block: list[int], bits: int, width: int) -> list[int]:
    """The layout of the notes, one value at a time (slow, independent of the numpy code)."""
    lanes = BLOCK // width
    words = [0] * (BLOCK * bits // width)
    for lane in range(lanes):
        for row in range(width):
            value = block[FL_ORDER[row // 8] * 16 + (row % 8) * 128 + lane]
            for bit in range(bits):
                if value >> bit & 1:
                    position = row * bits + bit
                    words[(position // width) * lanes + lane] |= 1 << (position % width)
    return words


@pytest.mark.parametrize("width, bits", [(8, 3), (16, 5), (32, 17), (64, 1), (64, 33), (64, 64)])
def test_fastlanes_layout_matches_the_reference(width, bits):
    rng = np.random.default_rng(width + bits)
    dtype = np.dtype(f"<u{width // 8}")
    limit = (1 << bits) - 1
    block = (rng.integers(0, 2**63, BLOCK, dtype=np.uint64) & np.uint64(limit)).astype(dtype)
    packed = pack_blocks(block[None, :], bits)
    assert packed[0].tolist() == _reference_pack(block.tolist(), bits, width)
    assert (unpack_blocks(packed, bits, width)[0] == block).all()


def test_inline_bitpacking_matches_pylance_bytes(tmp_path):
    """pylance bit-packs a sequential int64 column; our chunks must be the same bytes."""
    uri = str(tmp_path / "t")
    values = np.arange(5000, dtype=np.int64) * 3
    lance.write_dataset(pa.table({"i": values}), uri, data_storage_version="2.2")
    frag = lance.dataset(uri).get_fragments()[0]
    rel = "data/" + frag.data_files()[0].path
    store = ObjectStore(uri)
    with store.open_input(rel) as f:
        meta = read_file_metadata(f, store.size(rel), path=rel)
        page = meta.columns[0].pages[0]
        layout = unpack_any(page.encoding.direct.encoding, pb.PageLayout).mini_block_layout
        assert layout.value_compression.WhichOneof("compression") == "inline_bitpacking"
        words = np.frombuffer(f.read_at(page.buffer_sizes[0], page.buffer_offsets[0]), "<u4")
        chunks = f.read_at(page.buffer_sizes[1], page.buffer_offsets[1])
    starts = np.arange(0, len(values), BLOCK)
    ours, sizes = inline_pack_chunks(values.view(np.uint64), starts, np.minimum(BLOCK, len(values) - starts))
    position = done = 0
    for word, size in zip(words.tolist(), sizes.tolist()):
        chunk_bytes = ((word >> 4) + 1) * 8
        num_levels, buffer_size = struct.unpack_from("<HI", chunks, position)
        assert (num_levels, buffer_size) == (0, size)
        assert chunks[position + 8 : position + 8 + size] == ours[done : done + size].tobytes()
        position += chunk_bytes
        done += size


@pytest.mark.parametrize("widths", [
    [3, 3, 3, 7, 7, 0, 12, 12, 5],  # runs of equal widths: packed into views of the output
    [1, 9, 1, 9, 1, 9, 0, 9, 1],  # widths that keep changing: packed per width, scattered
])
def test_inline_pack_chunks_round_trip(widths):
    rng = np.random.default_rng(len(widths))
    blocks = [rng.integers(0, 1 << w, BLOCK, dtype=np.uint64) if w else np.zeros(BLOCK, np.uint64) for w in widths]
    for block, w in zip(blocks, widths):
        if w:
            block[0] = (1 << w) - 1  # each block needs exactly w bits
    values = np.concatenate(blocks)[: -100]  # a short last chunk
    starts = np.arange(0, len(values), BLOCK)
    counts = np.minimum(BLOCK, len(values) - starts)
    data, sizes = inline_pack_chunks(values, starts, counts)
    words = data.view("<u8")
    position = 0
    for i, size in enumerate(sizes.tolist()):
        chunk = words[position // 8 : (position + size) // 8]
        assert int(chunk[0]) == widths[i]
        decoded = unpack_blocks(chunk[1:][None, :], widths[i], 64)[0]
        assert (decoded[: counts[i]] == values[starts[i] : starts[i] + counts[i]]).all()
        position += size
    assert position == len(data)


def test_out_of_line_tail_rule():
    """Tails are raw unless packing the zero-padded block is smaller (Lance's rule)."""
    levels = np.arange(3000, dtype=np.uint16) % 4
    data, sizes = out_of_line_pack(levels, 2, np.array([0, 1024, 2000]), np.array([1024, 976, 10]))
    words = BLOCK * 2 // 16
    assert sizes.tolist() == [2 * words, 2 * words, 2 * 10]  # 976 values pack, 10 stay raw
    raw_tail = data[-20:].view("<u2")
    assert raw_tail.tolist() == levels[2000:2010].tolist()
    first = unpack_blocks(data[: 2 * words].view("<u2")[None, :], 2, 16)[0]
    assert (first == levels[:1024]).all()
    second = unpack_blocks(data[2 * words : 4 * words].view("<u2")[None, :], 2, 16)[0]
    assert (second[:976] == levels[1024:2000]).all() and not second[976:].any()


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_compiled_bit_packing_writes_the_numpy_bytes(width):
    """The numba packing kernel (the `fast` extra) is an accelerator only: inline chunks (short
    chunks and a short last one included) and out-of-line segments (packed and raw tails) come
    out as the numpy code packs them, at every bit width."""
    pytest.importorskip("numba")
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    from lance_format.encodings.structural import accel

    rng = np.random.default_rng(width)
    dtype = np.dtype(f"<u{width // 8}")
    starts = np.array([0, 1024, 2048, 2100, 3124, 4148])
    counts = np.diff(np.append(starts, 5000))
    try:
        for bits in sorted({0, 1, 3, width // 2 + 1, width - 1, width}):
            mask = np.uint64((1 << bits) - 1)
            values = (rng.integers(0, 2**63, 5000, dtype=np.uint64) & mask).astype(dtype)
            values[::7] = dtype.type(mask)  # every chunk needs all its bits
            results = []
            for compiled in (False, True):
                accel.use_compiled(compiled)
                assert (accel.kernels() is not None) == compiled
                inline = inline_pack_chunks(values, starts, counts)
                levels = out_of_line_pack(values, max(bits, 1), np.array([0, 1500, 3000]), np.array([1500, 1500, 2000]))
                results.append([part.tobytes() for part in (*inline, *levels)])
            assert results[0] == results[1], bits
    finally:
        accel.use_compiled(None)


@pytest.mark.parametrize("strings", [
    [f"v{i % 300}" for i in range(5000)],  # few distinct values: a dictionary
    [("x" * (i % 40)) + str(i % 50) for i in range(3000)],  # long values sharing their first 8 bytes
    [""] * 200 + ["a"] * 100 + [""],  # empty strings, at the end too
    [str(i % 2600) for i in range(5200)],  # exactly the cardinality limit (n / 2)...
    [str(i % 2601) for i in range(5200)],  # ...and one more
    [f"{i:05d}" for i in range(4000)],  # rejected by the sample
])
def test_compiled_dictionary_encoding_matches_arrow(strings):
    """The numba dictionary encoder takes the decisions and builds the dictionary (first
    occurrences, in order) and indices that Arrow's ``dictionary_encode`` gives."""
    pytest.importorskip("numba")
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    from lance_format.encodings.structural import accel
    from lance_format.encodings.structural.encode_dictionary import try_dictionary
    from lance_format.encodings.structural.encode_values import variable_values

    values = variable_values(pa.array(strings), None)
    results = []
    try:
        for compiled in (False, True):
            accel.use_compiled(compiled)
            assert (accel.kernels() is not None) == compiled
            encoded = try_dictionary(values)
            results.append(None if encoded is None else (
                encoded[0].dtype, encoded[0].tolist(), encoded[1].offsets.dtype, encoded[1].offsets.tolist(),
                encoded[1].data.tobytes(), encoded[1].offset_width, encoded[1].count))
    finally:
        accel.use_compiled(None)
    assert results[0] == results[1]


# -- rep/def ---------------------------------------------------------------------------------------


def _field(data_type: pa.DataType):
    return LanceSchema.from_arrow(pa.schema([("c", data_type)])).fields[0]


def test_repdef_of_nested_lists_with_empties():
    """The example of Lance's repdef.rs: rows [[[0,1],[],[2]],[[3]],[]], [], [[[4]]]."""
    data_type = pa.list_(pa.list_(pa.list_(pa.int32())))
    array = pa.array([[[[0, 1], [], [2]], [[3]], []], [], [[[4]]]], data_type)
    (leaf,) = shred(array, _field(data_type))
    assert leaf.rep.tolist() == [3, 0, 1, 1, 2, 2, 3, 3]
    assert leaf.defs.tolist() == [0, 0, 1, 0, 0, 2, 3, 0]
    assert leaf.layers == [ALL_VALID_ITEM, EMPTYABLE_LIST, EMPTYABLE_LIST, EMPTYABLE_LIST]
    assert leaf.values.to_pylist() == [0, 1, 2, 3, 4]
    assert leaf.max_visible_def == 0


def test_repdef_of_nested_struct_nulls():
    """[{"middle": {"inner": 1}}, NULL, {"middle": NULL}, {"middle": {"inner": NULL}}] -> 0, 3, 2, 1."""
    data_type = pa.struct([("middle", pa.struct([("inner", pa.int32())]))])
    array = pa.array([{"middle": {"inner": 1}}, None, {"middle": None}, {"middle": {"inner": None}}], data_type)
    (leaf,) = shred(array, _field(data_type))
    assert leaf.rep is None
    assert leaf.defs.tolist() == [0, 3, 2, 1]
    assert leaf.layers == [NULLABLE_ITEM] * 3
    assert leaf.valid.tolist() == [True, False, False, False]


def test_repdef_null_and_empty_lists_of_nullable_items():
    data_type = pa.list_(pa.int32())
    array = pa.array([[], [0], None, [0, None, 2]], data_type)
    (leaf,) = shred(array, _field(data_type))
    assert leaf.layers == [NULLABLE_ITEM, NULL_AND_EMPTY_LIST]
    assert leaf.rep.tolist() == [1, 1, 1, 1, 0, 0]
    assert leaf.defs.tolist() == [3, 0, 2, 0, 1, 0]
    assert leaf.num_items == 4 and leaf.max_visible_def == 1


def test_repdef_struct_children_share_levels():
    data_type = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])
    array = pa.array([{"a": 1, "b": ["x"]}, None, {"a": None, "b": []}], data_type)
    a, b = shred(array, _field(data_type))
    assert (a.name, b.name) == ("c.a", "c.b.item")
    assert a.defs.tolist() == [0, 2, 1]
    assert b.rep.tolist() == [1, 1, 1]
    # a path mixing structs and lists takes its layers from the schema (see _finish): the list
    # is declared null-and-empty although this page has no null list
    assert b.layers == [ALL_VALID_ITEM, NULL_AND_EMPTY_LIST, NULLABLE_ITEM]
    assert b.defs.tolist() == [0, 3, 2]
    assert b.num_items == 1


def test_repdef_layers_of_list_only_paths_follow_the_data():
    data_type = pa.list_(pa.list_(pa.int32()))
    (leaf,) = shred(pa.array([[[1], [2, 3]], [[4]]], data_type), _field(data_type))
    assert leaf.layers == [ALL_VALID_ITEM, pb.REPDEF_ALL_VALID_LIST, pb.REPDEF_ALL_VALID_LIST]
    assert leaf.defs is None


# -- refusals and errors ---------------------------------------------------------------------------


def _writer(tmp_path, schema: pa.Schema, version: str = "2.2", **kwargs) -> LanceFileWriter:
    return LanceFileWriter(ObjectStore(tmp_path), "f.lance", LanceSchema.from_arrow(schema), version=version, **kwargs)


@pytest.mark.parametrize("version", ["2.3", "0.1", "next", "legacy", "3.0"])
def test_unsupported_file_versions(tmp_path, version):
    with pytest.raises(UnsupportedFeatureError, match="not supported") as info:
        _writer(tmp_path, pa.schema([("i", pa.int32())]), version)
    assert info.value.path == "f.lance"
    assert not (tmp_path / "f.lance").exists()


@pytest.mark.parametrize(
    "data_type, column",
    [
        (pa.list_(pa.string(), 2), "f"),
        (pa.struct([("s", pa.list_(pa.struct([("x", pa.int32())]), 3))]), "f.s"),
    ],
    ids=["fsl-of-strings", "fsl-of-structs"],
)
def test_unwritable_types_name_the_column(tmp_path, data_type, column):
    with pytest.raises(UnsupportedFeatureError) as info:
        _writer(tmp_path, pa.schema([("ok", pa.int32()), ("f", data_type)]))
    assert info.value.column == column
    assert info.value.path == "f.lance"


def test_nulls_in_a_non_nullable_column_name_it(tmp_path):
    writer = _writer(tmp_path, pa.schema([pa.field("n", pa.int32(), nullable=False)]))
    with pytest.raises(SchemaMismatchError) as info:
        writer.write_batch(pa.record_batch([pa.array([1, None], pa.int32())], names=["n"]))
    assert info.value.column == "n"
    writer.abort()
    assert not (tmp_path / "f.lance").exists()


def test_struct_nulls_need_2_1(tmp_path):
    data_type = pa.struct([("x", pa.int32())])
    batch = pa.record_batch([pa.array([{"x": 1}, None], data_type)], names=["s"])
    writer = _writer(tmp_path, batch.schema, "2.0")
    with pytest.raises(UnsupportedFeatureError, match="2.1") as info:
        writer.write_batch(batch)
    assert info.value.column == "s"
    writer.abort()
    writer = _writer(tmp_path, batch.schema, "2.1")
    writer.write_batch(batch)
    assert writer.finish().field_ids == [1]  # leaf columns only: the struct has none


# -- streaming -------------------------------------------------------------------------------------


def test_pages_are_written_while_streaming(tmp_path):
    """Memory is bounded by the page size: pages hit the file before finish()."""
    schema = pa.schema([("i", pa.int64()), ("s", pa.string())])
    writer = _writer(tmp_path, schema, max_page_bytes=64 * 1024)
    for start in range(0, 200_000, 20_000):
        ids = np.arange(start, start + 20_000)
        writer.write_batch(pa.record_batch([pa.array(ids), pa.array(ids.astype(str))], schema=schema))
    assert (tmp_path / "f.lance").stat().st_size > 1_000_000 or writer._pos > 1_000_000
    written = writer.finish()
    assert written.num_rows == 200_000 and written.field_ids == [0, 1] and written.column_indices == [0, 1]
    table = lance.file.LanceFileReader(str(tmp_path / "f.lance")).read_all().to_table()
    assert table.column("s").to_pylist()[-1] == "199999"


# -- FSST ------------------------------------------------------------------------------------------


def _fsst_round_trip(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray, bytes]:
    from lance_format.encodings.buffers import DecodeContext
    from lance_format.encodings.structural import encode_fsst, fsst
    from lance_format.encodings.structural.blocks import Variable

    offsets = np.concatenate(([0], np.cumsum([len(s) for s in strings]))).astype(np.int64)
    data = np.frombuffer(b"".join(strings), np.uint8)
    table = encode_fsst.train(data, offsets)
    packed, packed_offsets = encode_fsst.compress(data, offsets, table)
    raw_table = encode_fsst.symbol_table_bytes(table)
    ctx = DecodeContext("unit", "s")
    back = fsst.decompress(Variable(packed_offsets, packed), fsst.parse_symbol_table(raw_table, ctx), ctx)
    assert [bytes(back.data[a:b]) for a, b in zip(back.offsets[:-1], back.offsets[1:])] == strings
    return packed, packed_offsets, raw_table


def test_fsst_symbol_table_layout(kernel_policy):
    strings = [f"https://example.com/item-{i:05d}".encode() for i in range(3000)]
    packed, offsets, raw = _fsst_round_trip(strings)
    assert len(raw) == 2312
    header = struct.unpack_from("<Q", raw)[0]
    count = header & 0xFF
    assert header >> 32 == 0x46535354 and (header >> 24) & 1 == 1 and 0 < count <= 255
    lengths = np.frombuffer(raw, np.uint8, count, 8 + 8 * count)
    assert lengths.min() >= 1 and lengths.max() <= 8
    assert not any(raw[8 + 9 * count:])  # zero padding after the lengths
    assert offsets[-1] == len(packed) < sum(map(len, strings)) / 3


@pytest.mark.parametrize("kind", ["escapes", "binary", "long", "empty", "tiny", "utf8"])
def test_fsst_round_trips(kind, kernel_policy):
    rng = np.random.default_rng(4)
    strings = {
        "escapes": [bytes([255, 255, i % 256, 255]) * (i % 5) for i in range(2000)],
        "binary": [rng.bytes(int(k)) for k in rng.integers(0, 60, 3000)],
        "long": [(b"lorem ipsum %d " % i) * 200 for i in range(60)],  # beyond the parse unit
        "empty": [b""] * 50 + [b"abc"] + [b""] * 50,
        "tiny": [b"x"],
        "utf8": [f"naïve café 東京 🚀 {i}".encode() for i in range(2000)],
    }[kind]
    _fsst_round_trip(strings)


def test_fsst_training_is_reproducible(kernel_policy):
    strings = [f"customer-{i:06d}@example.com/echo".encode() for i in range(20_000)]
    assert _fsst_round_trip(strings)[2] == _fsst_round_trip(strings)[2]


def test_fsst_decodes_large_blocks_in_passes(monkeypatch):
    from lance_format.encodings.structural import accel, fsst

    # the passes are the numpy decoder's (the compiled one writes its output once, at its size)
    monkeypatch.setattr(accel, "_kernels", None)
    monkeypatch.setattr(accel, "_loaded", True)
    monkeypatch.setattr(fsst, "_PASS_CODES", 1 << 9)  # many passes from a small block
    rng = np.random.default_rng(2)
    strings = [b"%d-" % i + rng.bytes(int(k)) + b"\xff" * (i % 3) for i, k in enumerate(rng.integers(0, 30, 4000))]
    _fsst_round_trip(strings)


FSST_SHAPES = {
    "urls": [f"https://shop.example.com/item-{i:06d}?ref={i % 7}".encode() for i in range(20_000)],
    "escapes": [bytes([255, 255, i % 256, 255]) * (i % 5) for i in range(2000)],
    "binary": [np.random.default_rng(4).bytes(int(k)) for k in np.random.default_rng(5).integers(0, 60, 3000)],
    "long": [(b"lorem ipsum %d " % i) * 200 for i in range(60)],
    "empty_and_short": [b""] * 50 + [b"ab", b"abc", b"x"] * 300 + [b""] * 50,
    "utf8": [f"naïve café 東京 🚀 {i}".encode() for i in range(2000)],
    "json": [b'{"id": %d, "kind": "k%d", "score": 0.%03d}' % (i, i % 10, i % 997) for i in range(30_000)],
}


@pytest.mark.parametrize("kind", sorted(FSST_SHAPES))
def test_fsst_compiled_kernels_write_and_read_the_same_bytes(kind):
    """The numba kernels are an accelerator only: same symbol table, same codes, same offsets,
    same decoded strings as the numpy code."""
    pytest.importorskip("numba")
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    from lance_format.encodings.structural import accel

    results = {}
    try:
        for compiled in (False, True):
            accel.use_compiled(compiled)
            assert (accel.kernels() is not None) == compiled
            results[compiled] = _fsst_round_trip(FSST_SHAPES[kind])
    finally:
        accel.use_compiled(None)
    (numpy_codes, numpy_offsets, numpy_table), (codes, offsets, table) = results[False], results[True]
    assert table == numpy_table
    assert np.array_equal(offsets, numpy_offsets) and offsets.dtype == numpy_offsets.dtype
    assert np.array_equal(codes, numpy_codes) and codes.dtype == numpy_codes.dtype


def test_fsst_jit_can_be_disabled_from_the_environment(monkeypatch):
    from lance_format.encodings.structural import accel

    monkeypatch.setenv(accel.JIT_ENV, "0")
    accel.use_compiled(True)
    try:
        assert accel.kernels(1 << 40) is None
    finally:
        monkeypatch.delenv(accel.JIT_ENV)
        accel.use_compiled(None)
    accel.use_compiled(True)
    try:
        assert (accel.kernels() is not None) == (importlib.util.find_spec("numba") is not None)
    finally:
        accel.use_compiled(None)


def test_kernels_load_only_after_enough_work(monkeypatch):
    """Importing numba costs ~0.3 s: small one-off jobs stay on numpy."""
    pytest.importorskip("numba")
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    from lance_format.encodings.structural import accel

    monkeypatch.delenv(accel.JIT_ENV, raising=False)

    accel.use_compiled(None)
    try:
        assert accel.kernels(accel.WORTH_LOADING // 2) is None
        assert accel.kernels() is None
        assert accel.kernels(accel.WORTH_LOADING // 2) is not None  # the work adds up
        assert accel.kernels() is not None  # loaded: used from now on
    finally:
        accel.use_compiled(None)
