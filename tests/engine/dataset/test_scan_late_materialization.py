"""Late-materialized filtered scans and the selective takes under them, against official Lance.

A selective filter reads its own columns first and takes the other columns of the passing rows
only, so the take paths of mini-block pages (only the taken strings' offsets and bytes, only the
taken rows made into Arrow, list rows that begin in a chunk not read) carry most of such a scan.
Tables of both writers, several fragments, deletions, nulls, lists crossing chunk edges.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural.blocks import take_block
from lance_format.encodings.structural.chunk_codecs import VariableChunks
from lance_format.errors import CorruptFileError
from lance_format.io.threads import serial_decoding
from tests.compat import assert_tables_equal

ROWS = 30_000
CTX = DecodeContext("f.lance", "col")
WORDS = np.array(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"])


def _table(rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(11)
    ids = np.arange(rows, dtype=np.int64)
    lengths = rng.integers(0, 5, rows)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    tags = pa.ListArray.from_arrays(pa.array(offsets), pa.array(WORDS[rng.integers(0, 6, int(offsets[-1]))]),
                                    mask=pa.array(rng.random(rows) < 0.1))
    x = rng.random(rows)
    return pa.table({
        "id": ids,
        "x": x,
        "cat": pa.array(WORDS[rng.integers(0, 6, rows)]),
        # unique text (FSST), short random text (plain variable), a nullable filter column
        "url": pa.array([f"https://example.com/item/{i * 7919 % 100003:06d}?q={WORDS[i % 6]}" for i in range(rows)]),
        "code": pa.array([bytes(rng.integers(33, 127, int(n), dtype=np.uint8)).decode()
                          for n in rng.integers(0, 9, rows)]),
        "note": pa.array([None if i % 4 == 0 else f"note {i % 977}" for i in range(rows)]),
        "score": pa.array([None if i % 7 == 0 else int(i % 1000) for i in range(rows)], pa.int32()),
        "tags": tags,
        "point": pa.StructArray.from_arrays(
            [pa.array(rng.standard_normal(rows)), pa.array(rng.integers(0, 9, rows).astype(np.int32))],
            ["lat", "zone"], mask=pa.array(rng.random(rows) < 0.05)),
    })


@pytest.fixture(scope="module", params=["ours", "pylance"])
def uri(request, tmp_path_factory) -> str:
    """The table in three fragments with deletions, written by either engine."""
    path = str(tmp_path_factory.mktemp("late") / "t.lance")
    engine = lance_format if request.param == "ours" else lance
    engine.write_dataset(_table(), path, data_storage_version="2.2", max_rows_per_file=12_000)
    lance.dataset(path).delete("id % 89 = 3 OR (id >= 13000 AND id < 14500)")
    return path


FILTERS = [
    "cat = 'echo' AND x > 0.5",  # ~8%: every chunk of the other columns holds a few rows
    "id % 1000 = 17",  # very selective: most chunks skipped, list rows begin in unread chunks
    "x < 0.3",  # dense: batch ranges are read instead of taken
    "note IS NULL AND x > 0.9",
    "score > 990 OR note = 'note 5'",  # nulls in the filter columns
    "x > 0.5 AND x < 0.50001",  # nothing or almost nothing passes
]


@pytest.mark.parametrize("condition", FILTERS)
def test_filtered_scans_match_pylance(uri, condition):
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    expected = theirs.to_table(filter=condition)
    assert_tables_equal(ours.to_table(filter=condition), expected, condition)
    with serial_decoding():
        assert_tables_equal(ours.to_table(filter=condition), expected, f"serial: {condition}")


@pytest.mark.parametrize("options", [
    {"limit": 37, "offset": 0},
    {"limit": 500, "offset": 123},
    {"offset": 900},
    {"with_row_id": True},
    {"with_row_id": True, "with_row_address": True, "columns": ["url", "tags"]},
    {"columns": ["tags", "point", "code"], "batch_size": 700},
])
def test_filtered_scan_options_match_pylance(uri, options):
    condition = "cat = 'echo' AND x > 0.5"
    got = lance_format.dataset(uri).to_table(filter=condition, **options)
    assert_tables_equal(got, lance.dataset(uri).to_table(filter=condition, **options), str(options))


def test_sparse_takes_match_pylance(uri):
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    count = ours.count_rows()
    rng = np.random.default_rng(4)
    for picks in (np.sort(rng.choice(count, 1500, replace=False)), np.arange(0, count, 997), np.array([count - 1])):
        assert_tables_equal(ours.take(picks.tolist()), theirs.take(picks.tolist()), f"{len(picks)} rows")


def _variable_chunks(strings: list[list[bytes]], ow: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mini-block string buffers (offsets, then bytes; 8-byte aligned) of several chunks."""
    buf, starts, sizes = b"", [], []
    for chunk in strings:
        head = (len(chunk) + 1) * ow
        ends = np.cumsum([0] + [len(s) for s in chunk]) + head
        body = ends.astype(f"<u{ow}").tobytes() + b"".join(chunk)
        starts.append(len(buf))
        sizes.append(len(body))
        buf += body + b"\0" * (-len(body) % 8)
    counts = np.array([len(c) for c in strings], np.int64)
    return (np.frombuffer(buf, np.uint8).copy(), np.array(starts, np.int64)[:, None],
            np.array(sizes, np.int64)[:, None], counts)


def test_variable_take_reads_only_the_picked_values():
    strings = [[b"a", b"", b"ccc"], [b"dddd", b"ee"], [], [b"f", b"gg", b"hhh", b""]]
    buf, starts, sizes, counts = _variable_chunks(strings)
    codec = VariableChunks(32)
    flat = [s for chunk in strings for s in chunk]
    for picks in ([0, 1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 8], [4], []):
        index = np.array(picks, np.int64)
        block = codec.take(buf, starts, sizes, counts, index, CTX)
        whole = take_block(codec.decode(buf, starts, sizes, counts, CTX), index)
        assert block.n == len(picks)
        got = [bytes(block.data[block.offsets[i]:block.offsets[i + 1]]) for i in range(block.n)]
        assert got == [flat[i] for i in picks]
        assert got == [bytes(whole.data[whole.offsets[i]:whole.offsets[i + 1]]) for i in range(whole.n)]


def test_variable_take_refuses_offsets_outside_their_chunk():
    buf, starts, sizes, counts = _variable_chunks([[b"abc", b"de"], [b"fgh"]])
    bad = buf.copy()
    bad[4:8] = np.frombuffer(np.uint32(200).tobytes(), np.uint8)  # the end of the first string
    codec = VariableChunks(32)
    with pytest.raises(CorruptFileError, match="string offsets"):
        codec.take(bad, starts, sizes, counts, np.array([0]), CTX)
    # a picked value of another chunk is still fine
    assert codec.take(bad, starts, sizes, counts, np.array([2]), CTX).n == 1
    short = sizes.copy()
    short[0, 0] = 8  # shorter than the chunk's three offsets
    with pytest.raises(CorruptFileError, match="shorter than its offsets"):
        codec.take(buf, starts, short, counts, np.array([2]), CTX)


@pytest.mark.parametrize("writer", [lance_format, lance])
@pytest.mark.parametrize("nullable", [False, True])
def test_takes_of_rows_after_lists_longer_than_a_chunk(tmp_path, writer, nullable):
    """A run of chunks that begins inside a long list of a row not taken (a chunk's preamble)
    drops that row's levels and values before joining the runs."""
    rows = 3_000
    lengths = np.where(np.arange(rows) % 50 == 7, 3_000, np.arange(rows) % 3)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    items = pa.array(np.arange(int(offsets[-1]), dtype=np.int64) * 3)
    mask = pa.array(np.arange(rows) % 11 == 4) if nullable else None
    values = pa.ListArray.from_arrays(pa.array(offsets), items, mask=mask)
    uri = str(tmp_path / "long.lance")
    writer.write_dataset(pa.table({"id": np.arange(rows), "values": values}), uri, data_storage_version="2.2")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    after_long = np.arange(8, rows, 50)  # the row after each long one, never the long one
    for picks in (after_long, np.sort(np.concatenate([after_long, after_long + 1, after_long - 3]))):
        assert_tables_equal(ours.take(picks.tolist()), theirs.take(picks.tolist()), f"{len(picks)} rows")
    condition = "id % 50 = 8 OR id % 50 = 10"
    assert_tables_equal(ours.to_table(filter=condition), theirs.to_table(filter=condition), condition)


@pytest.mark.parametrize("compiled", [False, True])
def test_gathers_of_many_short_ranges(compiled, monkeypatch):
    from lance_format.encodings.structural import accel, blocks

    if compiled and accel.kernels() is None and accel._load() is None:
        pytest.skip("numba kernels unavailable")
    monkeypatch.setattr(blocks.accel, "kernels", (lambda work=0: accel._load()) if compiled else (lambda work=0: None))
    rng = np.random.default_rng(2)
    buf = rng.integers(0, 256, 5_000, dtype=np.uint8)
    starts = rng.integers(0, 4_900, 400)
    lengths = rng.integers(0, 40, 400)
    expected = np.concatenate([buf[s:s + n] for s, n in zip(starts, lengths)])
    assert np.array_equal(blocks.gather(buf, starts, lengths), expected)
    with pytest.raises(IndexError):
        blocks.gather(buf, np.append(starts, 4_990), np.append(lengths, 20))  # past the end


@pytest.mark.parametrize("bits", [8, 16, 32, 64, 128])
def test_fixed_takes_of_every_width(bits):
    from lance_format.encodings.structural.blocks import Fixed

    width = bits // 8
    data = np.arange(10 * width, dtype=np.uint8)
    index = np.array([9, 0, 3, 3])
    taken = take_block(Fixed(data, bits), index)
    assert np.array_equal(taken.data, data.reshape(10, width)[index].reshape(-1))


@pytest.mark.parametrize("width, bits", [(8, 0), (8, 3), (8, 8), (16, 5), (16, 16), (32, 0), (32, 7), (32, 31),
                                         (32, 32), (64, 1), (64, 13), (64, 63), (64, 64)])
def test_fastlanes_takes_of_single_elements(width, bits):
    from lance_format.encodings.structural import fastlanes
    from tests.engine.file.test_file_v2_1_read_units import fastlanes_pack

    rng = np.random.default_rng(width * 100 + bits)
    blocks = [rng.integers(0, 1 << min(bits, 63), 1024, dtype=np.uint64).astype(fastlanes.word_dtype(width))
              for _ in range(3)]
    if bits == 64:
        blocks[1][5] = np.uint64(0xFFFFFFFFFFFFFFFF)  # the top bit survives the int64 reads
    packed = [fastlanes_pack(b, bits, width).view(np.uint8) if bits else np.zeros(0, np.uint8) for b in blocks]
    buf = np.concatenate([np.zeros(8, np.uint8)] + packed)
    at = 8 + np.cumsum([0] + [len(p) for p in packed[:-1]])
    block = rng.integers(0, 3, 500)
    elements = rng.integers(0, 1024, 500)
    got = fastlanes.take(buf, at[block], np.full(500, bits), elements, width)
    assert got.dtype == fastlanes.word_dtype(width)
    assert np.array_equal(got, np.array([blocks[b][e] for b, e in zip(block, elements)], got.dtype))


def test_bitpacked_and_flat_chunk_takes_match_decoding(tmp_path):
    """Takes of bit-packed (varying bit widths per chunk) and flat mini-block values equal the
    decoded values at the same rows, in files of both writers."""
    rng = np.random.default_rng(8)
    rows = 20_000
    small = rng.integers(0, 8, rows)
    small[5_000:6_000] = rng.integers(0, 1 << 40, 1_000)  # a few chunks of wide values
    table = pa.table({"packed": small.astype(np.int64), "flat": rng.standard_normal(rows),
                      "narrow": rng.integers(-100, 100, rows).astype(np.int16),
                      "maybe": pa.array(np.where(np.arange(rows) % 5 == 0, None, small), pa.int64())})
    picks = np.sort(rng.choice(rows, 700, replace=False))
    for writer in (lance_format, lance):
        uri = str(tmp_path / f"{writer.__name__}.lance")
        writer.write_dataset(table, uri, data_storage_version="2.2")
        got = lance_format.dataset(uri).take(picks.tolist())
        assert_tables_equal(got, table.take(picks), writer.__name__)
        assert_tables_equal(got, lance.dataset(uri).take(picks.tolist()), writer.__name__)


def test_inline_bitpacked_takes_across_buffers_of_several_blocks():
    from lance_format.encodings.structural.block_codecs import InlineBitpackedBlock
    from tests.engine.file.test_file_v2_1_read_units import fastlanes_pack

    rng = np.random.default_rng(6)
    buffers, counts, values = [], [2500, 0, 700], []
    for count, bits in zip(counts, (10, 4, 3)):
        chunk = rng.integers(0, 1 << bits, count).astype(np.uint16)
        padded = np.zeros(-(-count // 1024) * 1024, np.uint16)
        padded[:count] = chunk
        buffers.append(b"".join(np.array([bits], np.uint16).tobytes()
                                + fastlanes_pack(padded[i:i + 1024], bits, 16).tobytes()
                                for i in range(0, len(padded), 1024)))
        values.append(chunk)
    starts = np.cumsum([0] + [len(b) for b in buffers[:-1]])
    buf = np.frombuffer(b"".join(buffers), np.uint8)
    codec = InlineBitpackedBlock(16)
    flat = np.concatenate(values)
    picks = np.array([0, 3, 1023, 1024, 2047, 2048, 2499, 2500, 3199])
    sizes = np.array([len(b) for b in buffers])
    taken = codec.take_many(buf, starts, sizes, np.array(counts), picks, CTX)
    assert np.array_equal(taken.data.view("<u2"), flat[picks])
    assert np.array_equal(codec.decode_many(buf, starts, sizes, np.array(counts), CTX).data.view("<u2"), flat)


def test_group_of_sorted_values():
    from lance_format.encodings.structural.blocks import group_of

    starts = np.array([0, 5, 5, 9, 20])  # group 1 is empty (group 2 starts at the same row)
    values = np.array([0, 4, 5, 8, 9, 19, 20, 31])
    expected = np.clip(np.searchsorted(starts, values, side="right") - 1, 0, None)
    assert np.array_equal(group_of(values, starts), expected)
    assert np.array_equal(group_of(np.array([3, 7]), np.array([5, 6])), [0, 1])  # below the first start: group 0
    assert len(group_of(np.zeros(0, np.int64), starts)) == 0


def test_matching_rows_keeps_only_true_rows():
    from lance_format.dataset.sql.filter import matching_rows, to_expression

    batch = pa.record_batch({"x": pa.array([1.0, None, 3.0, float("nan"), -0.0]), "s": ["a", "b", None, "d", "e"]})
    cases = {"x > 1": [2, 3], "x = 0": [4], "s <> 'b' OR x IS NULL": [0, 1, 3, 4], "x IS NULL AND s = 'b'": [1]}
    for sql, expected in cases.items():
        assert matching_rows(batch, to_expression(sql, batch.schema)).to_pylist() == expected, sql
    assert matching_rows(batch.slice(0, 0), to_expression("x > 1", batch.schema)).to_pylist() == []
    with pytest.raises(pa.ArrowException):  # not a predicate: refused as Table.filter refuses it
        matching_rows(batch, pa.compute.field("x"))
