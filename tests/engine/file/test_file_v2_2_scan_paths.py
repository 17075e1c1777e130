"""Fast paths of 2.1/2.2 full scans: strided full-zip values, Arrow dictionary takes, masked levels."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import fastlanes
from lance_format.encodings.structural.block_codecs import OutOfLineBitpackedBlock
from lance_format.encodings.structural.blocks import Dictionary, Fixed, Variable, materialize, to_arrow
from lance_format.encodings.structural.fullzip import _strided
from lance_format.errors import CorruptFileError
from tests.compat import assert_tables_equal
from tests.engine.file.test_file_v2_1_read_units import fastlanes_pack

CTX = DecodeContext("f.lance", "col")


def test_strided_values_match_a_gather():
    buf = np.arange(200, dtype=np.uint8)
    at = np.arange(5) * 12 + 3  # 4-byte values behind 8-byte control words
    expected = np.concatenate([buf[a : a + 4] for a in at])
    assert np.array_equal(_strided(buf, at, 4), expected)
    packed = np.arange(7) * 4 + 1  # values back to back: a view of the buffer
    assert np.array_equal(_strided(buf, packed, 4), buf[1:29])
    assert np.array_equal(_strided(buf, np.array([9]), 4), buf[9:13])
    assert _strided(buf, np.array([0, 4, 9]), 4) is None  # irregular spacing
    assert _strided(buf, np.array([0, 2, 4]), 4) is None  # overlapping values
    assert _strided(buf, np.zeros(0, np.int64), 4) is None


def _dictionary_block(values: list[str], indices: list[int]) -> Dictionary:
    raw = [v.encode() for v in values]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    data = np.frombuffer(b"".join(raw), np.uint8)
    return Dictionary(np.array(indices, np.int64), Variable(offsets, data))


@pytest.mark.parametrize("data_type", [pa.string(), pa.large_string(), pa.binary()])
def test_string_dictionary_take_matches_materializing(data_type, kernel_policy):
    block = _dictionary_block(["alpha", "", "gamma", "delta"], [2, 0, 1, 3, 3, 0, 2])
    valid = np.array([True, True, False, True, False, True, True])
    fast = to_arrow(block, data_type, valid, CTX)
    slow = to_arrow(materialize(block, CTX), data_type, valid, CTX)
    fast.validate(full=True)
    assert fast.equals(slow)
    assert fast.to_pylist()[:3] == [b"gamma" if data_type == pa.binary() else "gamma",
                                    b"alpha" if data_type == pa.binary() else "alpha", None]
    assert to_arrow(block, data_type, None, CTX).null_count == 0


def test_dictionary_index_out_of_range_is_corrupt(kernel_policy):
    with pytest.raises(CorruptFileError, match="dictionary index out of range"):
        to_arrow(_dictionary_block(["a", "b"], [0, 2]), pa.string(), None, CTX)
    with pytest.raises(CorruptFileError, match="dictionary index out of range"):
        to_arrow(_dictionary_block(["a", "b"], [-1]), pa.string(), None, CTX)


def test_dictionary_take_of_long_and_empty_values(kernel_policy):
    """Values of every length around the compiled take's 8-byte steps, the last one at the
    very end of the dictionary's bytes, taken many times in random order."""
    rng = np.random.default_rng(5)
    values = ["x" * n + str(n) for n in range(0, 30)] + ["", "ü" * 9]
    indices = rng.integers(0, len(values), 5000).tolist() + [len(values) - 1, len(values) - 2]
    block = _dictionary_block(values, indices)
    valid = rng.random(len(indices)) < 0.9
    for data_type in (pa.string(), pa.large_string()):
        taken = to_arrow(block, data_type, valid, CTX)
        taken.validate(full=True)
        expected = pa.array(values, data_type).take(pa.array(indices))
        assert taken.equals(pa.Array.from_buffers(data_type, len(indices), [taken.buffers()[0]]
                                                  + expected.buffers()[1:]))
        assert taken.null_count == int((~valid).sum())


def test_fixed_width_dictionary_still_materializes():
    block = Dictionary(np.array([1, 0, 1], np.int64), Fixed(np.array([5, 9], "<i8").view(np.uint8), 64))
    assert to_arrow(block, pa.int64(), None, CTX).to_pylist() == [9, 5, 9]


def test_out_of_line_levels_without_raw_tails():
    rng = np.random.default_rng(3)
    codec = OutOfLineBitpackedBlock(16, 5)
    # partial blocks; only whole ones; equal partial blocks (and a shorter last one); one block
    for counts in ([1024, 300, 0, 2048, 1], [1024, 2048], [512, 512, 512, 77], [512, 512], [5]):
        chunks, expected = [], []
        for count in counts:
            values = rng.integers(0, 32, count).astype(np.uint16)
            nblocks = -(-count // 1024)
            padded = np.zeros(nblocks * 1024, np.uint16)
            padded[:count] = values
            chunks.append(b"".join(fastlanes_pack(padded[i : i + 1024], 5, 16).tobytes()
                                   for i in range(0, nblocks * 1024, 1024)))
            expected.append(values)
        data = np.frombuffer(b"".join(chunks), np.uint8)
        sizes = np.array([len(c) for c in chunks])
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        decoded = codec.decode_many(data, starts, sizes, np.array(counts), CTX)
        assert np.array_equal(decoded.data.view("<u2"), np.concatenate(expected))
    empty = codec.decode_many(np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64),
                              np.zeros(1, np.int64), CTX)
    assert len(empty.data) == 0
    assert fastlanes.BLOCK == 1024


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(5)
    # 128 float32s a value: large enough for full-zip pages
    flat = pa.array(rng.random(n * 128, dtype=np.float32))
    vec_valid = rng.random(n) > 0.2
    vectors = pa.FixedSizeListArray.from_arrays(flat, 128, mask=pa.array(~vec_valid))
    names = pa.array([None if i % 7 == 3 else f"user_{i % 50}" for i in range(n)])
    words = pa.array([f"w{i % 9}" for i in range(n * 2)])
    lists = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), words)
    return pa.table({"vec": vectors, "plain_vec": pa.FixedSizeListArray.from_arrays(flat, 128),
                     "name": names, "tags": lists})


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_scan_paths_match_pylance(tmp_path, writer):
    uri = str(tmp_path / "t")
    table = _table(3000)
    lib = lance_format if writer == "ours" else lance
    lib.write_dataset(table, uri, data_storage_version="2.2")
    ours = lance_format.dataset(uri)
    assert_tables_equal(ours.to_table(), table, f"ours reading {writer}")
    assert_tables_equal(ours.to_table(batch_size=777), lance.dataset(uri).to_table())


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_short_and_long_contiguous_takes(tmp_path, writer):
    """Point lookups take only the chunks holding their rows; long runs use the scan path.
    Both must return exactly the rows a full read has."""
    uri = str(tmp_path / "t")
    table = _table(20000)
    (lance_format if writer == "ours" else lance).write_dataset(table, uri, data_storage_version="2.2")
    full = lance_format.dataset(uri).to_table()
    for rows in ([0], [1], [7], [19999], [4095, 4096], list(range(9990, 10010)), list(range(100, 1300)),
                 list(range(18000, 20000)), [5, 6, 7, 19998]):
        got = lance_format.dataset(uri).take(rows)  # a fresh dataset: nothing decoded yet
        assert_tables_equal(got, full.take(rows), f"{writer} take {rows[:3]}..")


def _filter_table(n: int) -> pa.Table:
    rng = np.random.default_rng(8)
    cats = np.array(["alpha", "bravo", "charlie", "delta", "echo"])
    ids = np.arange(n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "x": pa.array(rng.random(n)),
        "cat": pa.array(cats[rng.integers(0, 5, n)]),
        "url": pa.array([None if i % 11 == 0 else f"https://example.com/u/{i:07d}/échelle" for i in ids]),
        "tags": pa.array([[f"t{i % 3}"] * (i % 3) if i % 5 else None for i in ids], pa.list_(pa.string())),
        "point": pa.array([{"lat": float(i), "zone": int(i % 7)} for i in ids],
                          pa.struct([("lat", pa.float64()), ("zone", pa.int32())])),
    })


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_filtered_scans_read_other_columns_for_passing_rows_only(tmp_path, writer, monkeypatch):
    """Late materialization: selective filters take the other columns of the passing rows,
    dense ones read them by range; both give exactly pylance's rows, with deletions, system
    columns, several fragments and limits."""
    from lance_format.dataset.fragment import LanceFragment

    uri = str(tmp_path / "t")
    table = _filter_table(30_000)
    lib = lance_format if writer == "ours" else lance
    lib.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=12_000)
    lance.dataset(uri).delete("id % 97 = 5")
    taken = []
    real_take = LanceFragment.take_physical

    def counting_take(self, schema, system_columns, offsets):
        taken.append(len(offsets))
        return real_take(self, schema, system_columns, offsets)

    monkeypatch.setattr(LanceFragment, "take_physical", counting_take)
    theirs = lance.dataset(uri)
    for sql, selective in [("cat = 'echo' AND x > 0.5", True), ("id < 100", True), ("x > 0.1", False),
                           ("url IS NULL AND x < 0.5", True), ("cat = 'nothing'", True)]:
        taken.clear()
        for kwargs in ({}, {"with_row_id": True, "batch_size": 1000}, {"columns": ["url", "tags"], "limit": 70}):
            got = lance_format.dataset(uri).to_table(filter=sql, **kwargs)
            assert_tables_equal(got, theirs.to_table(filter=sql, **kwargs), f"{writer} {sql} {kwargs}")
        assert bool(taken) == (selective and sql != "cat = 'nothing'"), sql
