"""Unit tests of the 2.1/2.2 decoding primitives: FastLanes, FSST, block codecs, rep/def unravelling."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import fastlanes, fsst
from lance_format.encodings.structural.block_codecs import (
    InlineBitpackedBlock,
    OutOfLineBitpackedBlock,
    RleBlock,
    VariableBlock,
)
from lance_format.encodings.structural.blocks import Variable, to_arrow
from lance_format.encodings.structural.repdef import (
    ALL_VALID_ITEM,
    ALL_VALID_LIST,
    NULL_AND_EMPTY_LIST,
    NULLABLE_ITEM,
    NULLABLE_LIST,
    LeafData,
    concat_leaves,
    unravel,
)
from lance_format.errors import CorruptFileError

CTX = DecodeContext("f.lance", "col")


# -- FastLanes -------------------------------------------------------------------------------------


def fastlanes_pack(values: np.ndarray, bits: int, width: int) -> np.ndarray:
    """Reference packer written from the layout description (value r of lane l -> output slot)."""
    lanes = 1024 // width
    out = np.zeros((bits, lanes), dtype=object)
    for r in range(width):
        slot = fastlanes.FL_ORDER[r // 8] * 16 + (r % 8) * 128
        for lane in range(lanes):
            value = int(values[slot + lane])
            bit = r * bits
            word, shift = divmod(bit, width)
            out[word, lane] |= (value << shift) & ((1 << width) - 1)
            if shift + bits > width:
                out[word + 1, lane] |= value >> (width - shift)
    return out.reshape(-1).astype(np.uint64).astype(fastlanes.word_dtype(width))


@pytest.mark.parametrize("width, bits", [(8, 1), (8, 5), (8, 7), (16, 3), (16, 9), (16, 15), (16, 16), (32, 1), (32, 7), (32, 20), (32, 31),
                                         (32, 32), (64, 1), (64, 13), (64, 63)])
def test_fastlanes_unpack_matches_reference_packing(kernel_policy, width, bits):
    rng = np.random.default_rng(bits)
    values = rng.integers(0, 1 << bits, 1024, dtype=np.uint64).astype(fastlanes.word_dtype(width))
    packed = fastlanes_pack(values, bits, width)
    assert len(packed) == fastlanes.packed_words(bits, width)
    assert np.array_equal(fastlanes.unpack(packed[None, :], bits, width)[0], values)


def test_fastlanes_unpacks_many_blocks_and_zero_width(kernel_policy):
    rng = np.random.default_rng(0)
    blocks = [rng.integers(0, 512, 1024).astype(np.uint32) for _ in range(40)]
    packed = np.stack([fastlanes_pack(b, 9, 32) for b in blocks])
    assert np.array_equal(fastlanes.unpack(packed, 9, 32), np.stack(blocks))
    narrow = [rng.integers(0, 2048, 1024).astype(np.uint16) for _ in range(7)]  # 11 of 16 bits: spills
    assert np.array_equal(fastlanes.unpack(np.stack([fastlanes_pack(b, 11, 16) for b in narrow]), 11, 16),
                          np.stack(narrow))
    assert not fastlanes.unpack(np.zeros((3, 0), np.uint16), 0, 16).any()


def test_inline_block_with_several_blocks_and_out_of_line_tails():
    rng = np.random.default_rng(4)
    values = rng.integers(0, 1000, 2500).astype(np.uint16)
    padded = np.zeros(3072, np.uint16)
    padded[:2500] = values
    data = b"".join(np.array([10], np.uint16).tobytes() + fastlanes_pack(padded[i:i + 1024], 10, 16).tobytes()
                    for i in range(0, 3072, 1024))
    decoded = InlineBitpackedBlock(16).decode(np.frombuffer(data, np.uint8), 2500, CTX)
    assert np.array_equal(decoded.data.view("<u2"), values)
    whole = np.frombuffer(fastlanes_pack(padded[:1024], 10, 16).tobytes(), np.uint8)
    raw_tail = np.concatenate([whole, np.frombuffer(values[1024:1100].tobytes(), np.uint8)])
    assert np.array_equal(OutOfLineBitpackedBlock(16, 10).decode(raw_tail, 1100, CTX).data.view("<u2"), values[:1100])
    packed_tail = np.concatenate([whole, np.frombuffer(fastlanes_pack(padded[1024:2048], 10, 16).tobytes(), np.uint8)])
    assert np.array_equal(OutOfLineBitpackedBlock(16, 10).decode(packed_tail, 1100, CTX).data.view("<u2"), values[:1100])
    with pytest.raises(CorruptFileError):
        OutOfLineBitpackedBlock(16, 10).decode(whole[:-10], 1024, CTX)


def test_out_of_line_levels_of_many_chunks_at_once():
    rng = np.random.default_rng(9)
    codec = OutOfLineBitpackedBlock(16, 6)
    chunks, expected = [], []
    for count, raw_tail in [(1024, False), (1500, True), (700, False), (2048, False), (5, True), (0, False)]:
        values = rng.integers(0, 64, count).astype(np.uint16)
        whole, tail = divmod(count, 1024)
        padded = np.zeros((whole + (tail > 0)) * 1024, np.uint16)
        padded[:count] = values
        blocks = [fastlanes_pack(padded[i:i + 1024], 6, 16).tobytes() for i in range(0, whole * 1024, 1024)]
        if tail:
            blocks.append(values[whole * 1024:].tobytes() if raw_tail else
                          fastlanes_pack(padded[whole * 1024:], 6, 16).tobytes())
        chunks.append(b"".join(blocks))
        expected.append(values)
    data = np.frombuffer(b"".join(chunks), np.uint8)
    sizes = np.array([len(c) for c in chunks])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    counts = np.array([len(v) for v in expected])
    decoded = codec.decode_many(data, starts, sizes, counts, CTX)
    assert np.array_equal(decoded.data.view("<u2"), np.concatenate(expected))
    with pytest.raises(CorruptFileError):
        codec.decode_many(data, starts, sizes - 2, counts, CTX)


def test_rle_and_variable_blocks():
    values = np.array([7, 1, 7], np.uint16)
    data = struct.pack("<Q", 6) + values.tobytes() + bytes([3, 255, 2])
    decoded = RleBlock(16).decode(np.frombuffer(data, np.uint8), 260, CTX)
    assert np.array_equal(decoded.data.view("<u2"), np.repeat(values, [3, 255, 2]))
    with pytest.raises(CorruptFileError, match="run lengths"):
        RleBlock(16).decode(np.frombuffer(data, np.uint8), 261, CTX)
    block = struct.pack("<II", 32, 20) + np.array([0, 2, 2], np.uint32).tobytes() + b"hi"
    decoded = VariableBlock().decode(np.frombuffer(block, np.uint8), 2, CTX)
    assert to_arrow(decoded, pa.string(), None, CTX).to_pylist() == ["hi", ""]
    with pytest.raises(CorruptFileError):
        VariableBlock().decode(np.frombuffer(block, np.uint8), 5, CTX)


# -- FSST ----------------------------------------------------------------------------------------


def symbol_table(symbols: list[bytes], enabled: bool = True) -> bytes:
    header = (fsst.FSST_MAGIC << 32) | (int(enabled) << 24) | len(symbols)
    body = b"".join(s.ljust(8, b"\0") for s in symbols) + bytes(len(s) for s in symbols)
    return struct.pack("<Q", header) + body.ljust(fsst.SYMBOL_TABLE_SIZE - 8, b"\0")


def decode_strings(table: bytes, parts: list[bytes]) -> list[bytes]:
    offsets = np.cumsum([0] + [len(p) for p in parts])
    block = Variable(offsets.astype(np.int64), np.frombuffer(b"".join(parts), np.uint8))
    out = fsst.decompress(block, fsst.parse_symbol_table(table, CTX), CTX)
    return to_arrow(out, pa.binary(), None, CTX).to_pylist()


def test_fsst_symbols_and_escapes(kernel_policy):
    table = symbol_table([b"hello", b" ", b"world!!!", b"x"])
    strings = [bytes([0, 1, 2]), bytes([255, 65, 3, 255, 255]), b"", bytes([255, 255, 255, 255, 0, 3])]
    assert decode_strings(table, strings) == [b"hello world!!!", b"Ax\xff", b"", b"\xff\xffhellox"]
    raw = symbol_table([b"ab"], enabled=False)
    assert decode_strings(raw, [b"plain", b"bytes"]) == [b"plain", b"bytes"]


def test_fsst_corruption_is_detected(kernel_policy):
    with pytest.raises(CorruptFileError, match="magic"):
        fsst.parse_symbol_table(b"\0" * fsst.SYMBOL_TABLE_SIZE, CTX)
    table = symbol_table([b"a"])
    with pytest.raises(CorruptFileError, match="escape"):
        decode_strings(table, [bytes([0, 255]), bytes([0])])
    with pytest.raises(CorruptFileError, match="not in the symbol table"):
        decode_strings(table, [bytes([0, 9])])
    # with escapes present: escaped unknown bytes are literals, unescaped ones are errors
    assert decode_strings(table, [bytes([255, 9, 0]), bytes([255, 255, 255, 9])]) == [b"\ta", b"\xff\t"]
    with pytest.raises(CorruptFileError, match="not in the symbol table"):
        decode_strings(table, [bytes([255, 9, 9])])
    with pytest.raises(CorruptFileError, match="escape"):
        decode_strings(table, [bytes([255, 255, 255]), bytes([0])])


def fsst_chunk_page(chunks: list[list[bytes]], width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A mini-block value buffer of ``variable`` chunks (offsets, then codes), 8-byte aligned:
    (buffer, chunk starts, chunk sizes, counts)."""
    page, starts, sizes = b"", [], []
    for strings in chunks:
        head = (len(strings) + 1) * width
        offsets = np.cumsum([head] + [len(s) for s in strings]).astype(f"<u{width}")
        chunk = offsets.tobytes() + b"".join(strings)
        starts.append(len(page))
        sizes.append(len(chunk))
        page += chunk + b"\0" * (-len(chunk) % 8)
    column = np.asarray
    return (np.frombuffer(page, np.uint8).copy(), column(starts, np.int64)[:, None], column(sizes, np.int64)[:, None],
            column([len(c) for c in chunks], np.int64))


@pytest.mark.parametrize("width", [4, 8])
def test_fsst_chunks_decode_and_corruption(kernel_policy, width):
    """FSST over variable chunks: the compiled path decodes straight from the chunks and must
    decode and refuse exactly as the gather-then-decode numpy path does."""
    from lance_format.encodings.structural.chunk_codecs import FsstChunks, VariableChunks

    table = fsst.parse_symbol_table(symbol_table([b"hello", b" ", b"world!!!", b"x"]), CTX)
    codec = FsstChunks(table, VariableChunks(width * 8))
    chunks = [[bytes([0, 1, 2]), b"", bytes([255, 65, 3])], [bytes([3, 3]), bytes([255, 255, 255, 255, 0])]]
    buf, starts, sizes, counts = fsst_chunk_page(chunks, width)
    out = codec.decode(buf, starts, sizes, counts, CTX)
    assert to_arrow(out, pa.binary(), None, CTX).to_pylist() == [b"hello world!!!", b"", b"Ax", b"xx",
                                                                  b"\xff\xffhello"]

    def corrupt(change) -> str:
        page = buf.copy()
        chunk_sizes = sizes.copy()
        change(page, chunk_sizes)
        with pytest.raises(CorruptFileError) as info:
            codec.decode(page, starts, chunk_sizes, counts, CTX)
        return str(info.value)

    def put(page, at, value):
        page[at: at + width] = np.frombuffer(np.array([value], f"<u{width}").tobytes(), np.uint8)

    second = int(starts[1, 0])
    assert "shorter than its offsets" in corrupt(lambda page, z: z.__setitem__((1, 0), width))
    assert "outside their buffer" in corrupt(lambda page, z: put(page, second, 1))
    assert "outside their buffer" in corrupt(lambda page, z: put(page, second + 2 * width, 999))
    assert "not increasing" in corrupt(lambda page, z: put(page, 2 * width, 4 * width + 1))
    assert "escape" in corrupt(lambda page, z: put(page, 3 * width, 4 * width + 4))  # first chunk ends in 255
    assert "not in the symbol table" in corrupt(lambda page, z: page.__setitem__(second + 3 * width, 9))


# -- rep/def --------------------------------------------------------------------------------------


def leaf(rep, defs, meanings, values: pa.Array) -> LeafData:
    rep = None if rep is None else np.array(rep, np.uint16)
    defs = None if defs is None else np.array(defs, np.uint16)
    layers, rows = unravel(rep, defs, meanings, len(values), CTX)
    return LeafData(layers, values, rows)


def test_null_and_empty_lists():
    # rows [], [0], None, [0, 1, 2]
    data = leaf([1, 1, 1, 1, 0, 0], [2, 0, 1, 0, 0, 0], [ALL_VALID_ITEM, NULL_AND_EMPTY_LIST], pa.array([0, 0, 1, 2]))
    assert data.rows == 4
    outer = data.layers[0]
    assert outer.offsets.tolist() == [0, 0, 1, 1, 4]
    assert outer.validity.tolist() == [True, True, False, True]
    assert data.slice(1, 3).layers[0].offsets.tolist() == [0, 1, 1]
    taken = data.take(np.array([0, 3]))
    assert taken.layers[0].offsets.tolist() == [0, 0, 3] and taken.values.to_pylist() == [0, 1, 2]


def test_nullable_struct_and_item_levels():
    # struct{x}: x null -> def 1, struct null -> def 2
    data = leaf(None, [0, 1, 2, 0], [NULLABLE_ITEM, NULLABLE_ITEM], pa.array([5, 0, 0, 6]))
    struct_layer, item_layer = data.layers
    assert struct_layer.validity.tolist() == [True, True, False, True]
    assert item_layer.validity.tolist() == [True, False, False, True]


def test_list_of_struct_of_list():
    # rows: [{l: [1, 2]}, None, {l: []}], None, [] with layers
    # [item, inner list (null+empty), struct (nullable), outer list (null+empty)]
    meanings = [ALL_VALID_ITEM, NULL_AND_EMPTY_LIST, NULLABLE_ITEM, NULL_AND_EMPTY_LIST]
    rep = [2, 0, 1, 1, 2, 2]
    defs = [0, 0, 3, 2, 4, 5]
    data = leaf(rep, defs, meanings, pa.array([1, 2]))
    outer, struct_layer, inner, _ = data.layers
    assert data.rows == 3
    assert outer.offsets.tolist() == [0, 3, 3, 3] and outer.validity.tolist() == [True, False, True]
    assert struct_layer.validity.tolist() == [True, False, True]
    # like Lance, a list below a null struct is null too
    assert inner.offsets.tolist() == [0, 2, 2, 2] and inner.validity.tolist() == [True, False, True]


def test_all_valid_list_with_null_items():
    data = leaf([1, 0, 1], [1, 0, 0], [NULLABLE_ITEM, ALL_VALID_LIST], pa.array([None, 4, 5]))
    assert data.layers[0].offsets.tolist() == [0, 2, 3] and data.layers[0].validity is None
    assert data.layers[1].validity.tolist() == [False, True, True]


def test_concat_mixed_validity():
    a = leaf([1, 1], [0, 1], [ALL_VALID_ITEM, NULLABLE_LIST], pa.array([1]))
    b = leaf([1, 0], None, [ALL_VALID_ITEM, NULLABLE_LIST], pa.array([2, 3]))
    both = concat_leaves([a, b])
    assert both.rows == 3 and both.layers[0].offsets.tolist() == [0, 1, 1, 3]
    assert both.layers[0].validity.tolist() == [True, False, True]


@pytest.mark.parametrize("rep, defs, meanings, n, match", [
    ([1, 0], [0, 0], [ALL_VALID_ITEM], 2, "no list layer"),
    (None, [0, 3], [NULLABLE_ITEM], 2, "beyond"),
    (None, [0, 1], [NULLABLE_ITEM], 3, "describe"),
    ([1, 0], [0], [ALL_VALID_ITEM, NULLABLE_LIST], 2, "repetition and"),
    (None, None, [ALL_VALID_LIST], 2, "innermost"),
    (None, [0], [9], 1, "unknown"),
])
def test_inconsistent_levels_are_corrupt(rep, defs, meanings, n, match):
    with pytest.raises(CorruptFileError, match=match):
        leaf(rep, defs, meanings, pa.array(range(n)))
