"""The compiled and numpy paths of nested 2.2 scans: list layers of rep/def levels, bit-packed
levels with raw tails, and whole files of lists, structs and vectors written by both engines."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.encodings.structural.block_codecs import InlineBitpackedBlock, OutOfLineBitpackedBlock
from lance_format.encodings.structural.encode_repdef import shred
from lance_format.encodings.structural.repdef import unravel
from lance_format.errors import CorruptFileError
from lance_format.schema import LanceSchema
from tests.compat import assert_tables_equal
from tests.engine.file.test_file_v2_1_read_units import fastlanes_pack

CTX = DecodeContext("f.lance", "col")


def _lists(rng: np.random.Generator, n: int, values: pa.Array, *, null_share: float = 0.2,
           max_len: int = 5, min_len: int = 0) -> pa.Array:
    """n lists of min_len..max_len items of ``values`` (taken from its start), some null."""
    lengths = rng.integers(min_len, max_len + 1, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    mask = pa.array(rng.random(n) < null_share) if null_share else None
    return pa.ListArray.from_arrays(pa.array(offsets), values.slice(0, int(offsets[-1])), mask=mask)


def _nullable(rng: np.random.Generator, array: pa.Array, share: float = 0.2) -> pa.Array:
    return pc.if_else(pa.array(rng.random(len(array)) < share), pa.nulls(len(array), array.type), array)


def _nested_arrays(n: int, seed: int = 4) -> dict[str, pa.Array]:
    rng = np.random.default_rng(seed)
    ints = _nullable(rng, pa.array(rng.integers(-1000, 1000, 20 * n)))
    struct = pa.StructArray.from_arrays([_nullable(rng, pa.array(rng.random(6 * n))), ints.slice(0, 6 * n)], ["x", "y"],
                                        mask=pa.array(rng.random(6 * n) < 0.2))
    inner_struct = pa.StructArray.from_arrays([pa.array(rng.integers(0, 9, n)), _nullable(rng, pa.array(
        [f"s{i}" for i in range(n)]))], ["c", "d"], mask=pa.array(rng.random(n) < 0.2))
    return {
        "ints": _lists(rng, n, ints),
        "ints_no_nulls": _lists(rng, n, pa.array(rng.integers(0, 1 << 40, 6 * n)), null_share=0),
        "points": _lists(rng, n, struct),
        "nested": pa.StructArray.from_arrays([_lists(rng, n, ints), inner_struct], ["a", "b"],
                                             mask=pa.array(rng.random(n) < 0.2)),
        "lists_of_lists": _lists(rng, n, _lists(rng, 6 * n, ints, max_len=3), max_len=3),
        # no null or empty list and no null item: repetition levels only (see list_starts)
        "dense": _lists(rng, n, pa.array(rng.integers(0, 9, 6 * n)), null_share=0, min_len=1),
        "dense_lists_of_lists": _lists(rng, n, _lists(rng, 6 * n, pa.array(rng.integers(0, 9, 20 * n)),
                                                      null_share=0, min_len=1, max_len=3),
                                       null_share=0, min_len=1, max_len=3),
    }


@pytest.mark.parametrize("name", ["ints", "ints_no_nulls", "points", "nested", "lists_of_lists", "dense",
                                  "dense_lists_of_lists"])
def test_list_layers_compiled_and_numpy_agree(name):
    pytest.importorskip("numba")
    array = _nested_arrays(3000)[name]
    field = LanceSchema.from_arrow(pa.schema([("c", array.type)])).fields[0]
    for leaf in shred(array, field):
        assert (leaf.defs is None) == name.startswith("dense")
        results = []
        for compiled in (False, True):
            accel.use_compiled(compiled)
            try:
                results.append(unravel(leaf.rep, leaf.defs, list(leaf.layers), leaf.num_items, CTX))
            finally:
                accel.use_compiled(None)
        (numpy_layers, numpy_rows), (compiled_layers, compiled_rows) = results
        assert numpy_rows == compiled_rows == len(array)
        for a, b in zip(numpy_layers, compiled_layers):
            assert a.is_list == b.is_list
            for x, y in ((a.validity, b.validity), (a.offsets, b.offsets)):
                assert (x is None) == (y is None)
                if x is not None:
                    assert np.array_equal(x, y)


@pytest.mark.parametrize("width", [16, 32])
def test_out_of_line_bitpacking_with_raw_tails(kernel_policy, width):
    """Chunks whose last partial block is stored as raw words (pylance's pages of lists): at
    least 8 chunks so that the compiled paths are used (16-bit levels: one unpacking kernel;
    other widths: range copies), with empty, whole-block and tail-only chunks among them."""
    rng = np.random.default_rng(8)
    dtype = np.dtype(f"<u{width // 8}")
    codec = OutOfLineBitpackedBlock(width, 5)
    counts = [1024 + 300, 77, 0, 2048, 1, 1024, 5, 1500, 3000, 900]
    chunks, expected = [], []
    for count in counts:
        values = rng.integers(0, 32, count).astype(dtype)
        whole = count // 1024
        # raw tails are copied as they are, whatever their bits
        values[whole * 1024:] = rng.integers(0, 1 << width, count - whole * 1024, dtype=np.uint64).astype(dtype)
        packed = b"".join(fastlanes_pack(values[i: i + 1024], 5, width).tobytes()
                          for i in range(0, whole * 1024, 1024))
        chunks.append(packed + values[whole * 1024:].tobytes())
        expected.append(values)
    data = np.frombuffer(b"".join(chunks), np.uint8)
    sizes = np.array([len(c) for c in chunks])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    decoded = codec.decode_many(data, starts, sizes, np.array(counts), CTX)
    assert np.array_equal(decoded.data.view(dtype), np.concatenate(expected))
    # a buffer shorter than its chunks, and a chunk size that fits no layout, are corruption
    with pytest.raises(CorruptFileError):
        codec.decode_many(data[:-2], starts, sizes, np.array(counts), CTX)
    wrong = sizes.copy()
    wrong[1] -= width // 8
    with pytest.raises(CorruptFileError, match="do not match their buffer size"):
        codec.decode_many(data, starts, wrong, np.array(counts), CTX)


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(12)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, np.float32)), 16)
    return pa.table({
        **_nested_arrays(n),
        "floats": _lists(rng, n, pa.array(rng.random(6 * n, np.float32))),
        "vectors": vectors,
        "vectors_null": _nullable(rng, vectors),
        "ints_null": _nullable(rng, pa.array(rng.integers(0, 1 << 40, n))),
        "flags": _nullable(rng, pa.array(rng.random(n) < 0.5)),
        "ts": _nullable(rng, pa.array(rng.integers(0, 1 << 50, n), pa.timestamp("us"))),
        "text": pa.array([f"t{i}" for i in range(n)], pa.large_string()),
    })


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_nested_columns_of_both_writers(tmp_path, writer, kernel_policy):
    """Every shape read whole and in batches that cut lists, null runs and chunks at odd places
    (pylance's pages hold a few thousand rows: many page and chunk boundaries) equals the source."""
    table = _table(40_000)
    uri = str(tmp_path / "t")
    (lance_format if writer == "ours" else lance).write_dataset(table, uri, data_storage_version="2.2",
                                                               max_rows_per_group=7777)
    ds = lance_format.dataset(uri)
    assert_tables_equal(ds.to_table(), table, f"ours reading {writer}")
    for column in table.column_names:
        assert_tables_equal(ds.to_table(columns=[column], batch_size=1001), table.select([column]), column)
    rows = np.sort(np.random.default_rng(1).choice(len(table), 500, replace=False))
    assert_tables_equal(ds.take(rows.tolist()), table.take(pa.array(rows)), "take")


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_lists_with_empty_and_null_runs_at_boundaries(tmp_path, writer, kernel_policy):
    """Long runs of empty and null lists (whole chunks of them, and runs across chunk and batch
    boundaries) around lists of many items."""
    n = 30_000
    kind = np.arange(n) // 1500 % 4  # runs of 1500 rows: empty, null, long, short
    lengths = np.where(kind == 0, 0, np.where(kind == 1, 0, np.where(kind == 2, 40, 1)))
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.arange(int(offsets[-1]), dtype=np.int64))
    lists = pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(kind == 1))
    table = pa.table({"l": lists, "s": pa.StructArray.from_arrays([lists], ["l"])})
    uri = str(tmp_path / "t")
    (lance_format if writer == "ours" else lance).write_dataset(table, uri, data_storage_version="2.2")
    ds = lance_format.dataset(uri)
    assert_tables_equal(ds.to_table(), table, f"ours reading {writer}")
    assert_tables_equal(ds.to_table(batch_size=1499), table, f"ours reading {writer} in batches")


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_inline_bitpacked_blocks_of_mixed_widths(kernel_policy, width):
    """Blocks each at its own bit width (0, 1, odd ones, the full width), in chunks whose last
    block is partial: the compiled unpacking (block by block, straight from the buffer) and the
    numpy one (grouped by width) give the values; a width above the words is corruption."""
    rng = np.random.default_rng(width)
    dtype = np.dtype(f"<u{width // 8}")
    codec = InlineBitpackedBlock(width)
    widths = [0, 1, width, 3, width - 1, 5, 5, width // 2]
    blocks, expected = [], []
    for bits in widths:
        values = rng.integers(0, 1 << bits, 1024, dtype=np.uint64).astype(dtype) if bits < 64 else \
            rng.integers(0, 1 << 63, 1024, dtype=np.uint64).astype(dtype) * 2 + 1
        packed = fastlanes_pack(values, bits, width).tobytes() if bits else b""
        blocks.append(np.array([bits], dtype).tobytes() + packed)
        expected.append(values)
    counts = np.array([1024 * 3, 1024 * 2 + 1000, 1024 + 17])  # chunks of 3, 3 and 2 blocks
    chunk_blocks = [blocks[0:3], blocks[3:6], blocks[6:8]]
    keep = [np.concatenate(expected[0:3]), np.concatenate(expected[3:6])[:2 * 1024 + 1000],
            np.concatenate(expected[6:8])[:1024 + 17]]
    chunks = [b"".join(c) for c in chunk_blocks]
    data = np.frombuffer(b"".join(chunks), np.uint8)
    sizes = np.array([len(c) for c in chunks])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    decoded = codec.decode_many(data, starts, sizes, counts, CTX)
    assert np.array_equal(decoded.data.view(dtype), np.concatenate(keep))
    bad = data.copy()
    bad[int(starts[1])] = width + 1  # the first block of the second chunk claims too many bits
    with pytest.raises(CorruptFileError):
        codec.decode_many(bad, starts, sizes, counts, CTX)
