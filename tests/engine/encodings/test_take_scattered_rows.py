"""Takes of scattered rows equal pylance's: random, unsorted and repeated indices, the first and
last rows, rows on both sides of mini-block chunk boundaries, nulls, ``list<string>``, nested
structs, fixed-size lists, large strings (full-zip pages) and deleted rows; tables written by
pylance and by us in every file version, read with the compiled kernels and with numpy only."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.encodings.buffers import DecodeContext
from lance_format.encodings.structural import accel
from lance_format.errors import LanceError

ROWS = 4000
PER_FILE = 1800


def _table(n: int = ROWS, seed: int = 30, struct_nulls: bool = True) -> pa.Table:
    rng = np.random.default_rng(seed)
    hosts = np.array([f"https://shop{i}.example.com/item?id={i * 7}" for i in range(40)], dtype=object)
    labels = np.array([f"user{i}@mail{i % 5}.example.org" for i in range(60)], dtype=object)
    counts = rng.integers(0, 5, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    items = pa.array(rng.choice(labels, int(offsets[-1])))
    items = pc.if_else(pa.array(rng.random(len(items)) < 0.1), pa.nulls(len(items), pa.string()), items)
    tags = pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(rng.random(n) < 0.15))
    # skewed categories, some null
    cat = pa.array(rng.choice(hosts, n, p=(w := 1.0 / np.arange(1, 41)) / w.sum()))
    cat = pc.if_else(pa.array(rng.random(n) < 0.05), pa.nulls(n, pa.string()), cat)
    point = pa.StructArray.from_arrays(
        [pa.array(rng.random(n)), pa.array(rng.integers(-50, 50, n)),
         pa.StructArray.from_arrays([pa.array([f"note {i}" if i % 3 else None for i in range(n)])], ["note"])],
        # file versions before 2.1 keep no struct validity
        ["x", "y", "inner"], mask=pa.array(rng.random(n) < 0.1) if struct_nulls else None)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(8 * n).astype(np.float32)), 8)
    # long strings: pylance writes them as full-zip pages (rows found through the repetition index)
    body = pa.array(["x" * int(k) + f"|{i}" for i, k in enumerate(rng.integers(200, 900, n))], pa.large_string())
    return pa.table({"id": pa.array(np.arange(n, dtype=np.int64)),
                     "x": pc.if_else(pa.array(rng.random(n) < 0.1), pa.nulls(n, pa.float64()), pa.array(rng.random(n))),
                     "cat": cat, "tags": tags, "point": point, "vector": vector, "body": body})


def _indices(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    # rows on both sides of every 1024-row step (chunk boundaries fall near them) and of the files'
    boundaries = np.unique(np.concatenate([np.arange(0, n, 1024), np.arange(0, n, PER_FILE)]))
    around = np.clip(np.concatenate([boundaries - 1, boundaries, boundaries + 1]), 0, n - 1)
    return {
        "random_sorted": np.sort(rng.choice(n, 150, replace=False)),
        "random_unsorted": rng.choice(n, 150, replace=False),
        "duplicates": rng.choice(n, 60, replace=True).repeat(2)[::-1],
        "first_last": np.array([n - 1, 0, n - 1, 0]),
        "boundaries": np.unique(around),
        "dense_run": np.arange(1000, 1400),
    }


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[tuple[str, str], str]:
    """One table per (writer, file version), with some rows deleted (in two fragments)."""
    root = tmp_path_factory.mktemp("take_scattered")
    out = {}
    for version in ("legacy", "2.0", "2.1", "2.2"):
        data = _table(struct_nulls=version not in ("legacy", "2.0"))
        for writer in ("pylance", "ours"):
            if writer == "ours" and version == "legacy":
                continue
            uri = str(root / f"{writer}_{version}.lance")
            module = lance if writer == "pylance" else lance_format
            module.write_dataset(data, uri, max_rows_per_file=PER_FILE, data_storage_version=version)
            out[writer, version] = uri
    return out



CASES = [(w, v, True) for w in ("pylance", "ours") for v in ("legacy", "2.0", "2.1", "2.2") if (w, v) != ("ours", "legacy")]
# the numpy fallback (no numba) of the 2.1/2.2 decoders
CASES += [("pylance", "2.1", False), ("ours", "2.2", False)]


@pytest.mark.parametrize(("writer", "version", "compiled"), CASES)
def test_take_matches_pylance(tables, writer, version, compiled):
    uri = tables[writer, version]
    accel.use_compiled(compiled)
    try:
        ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
        for label, idx in _indices(ROWS).items():
            got = ours.take(idx)
            want = theirs.take(idx)
            assert got.equals(want), (label, writer, version)
        columns = ["tags", "body"]
        idx = _indices(ROWS)["random_unsorted"]
        assert ours.take(idx, columns=columns).equals(theirs.take(idx, columns=columns))
    finally:
        accel.use_compiled(None)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_take_after_deletes_matches_pylance(tmp_path, version):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(3000, seed=5, struct_nulls=version != "2.0"), uri, max_rows_per_file=1200, data_storage_version=version)
    # delete rows pylance's way and ours (each engine then reads the other's deletion files)
    lance.dataset(uri).delete("id % 7 = 3 OR id < 5")
    lance_format.dataset(uri).delete("id >= 2990 OR (id > 1190 AND id < 1210)")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    n = theirs.count_rows()
    assert ours.count_rows() == n
    idx = np.concatenate([[0, n - 1], np.random.default_rng(3).choice(n, 200, replace=True)])
    accel.use_compiled(True)
    try:
        assert ours.take(idx).equals(theirs.take(idx))
        frag = ours.get_fragments()[1]
        local = np.array([0, 3, 5, 100, frag.count_rows() - 1])  # pylance's fragment take wants them sorted
        assert frag.take(local).equals(theirs.get_fragments()[1].take(local))
    finally:
        accel.use_compiled(None)


def test_take_out_of_range_is_refused(tables):
    ds = lance_format.dataset(tables["pylance", "2.2"])
    with pytest.raises((LanceError, IndexError, ValueError)):
        ds.take([0, ROWS])


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_take_of_rows_spanning_chunks_matches_pylance(tmp_path, version, compiled):
    """Long lists continue from chunk to chunk (the repetition index's trailers and preambles):
    rows before, inside and after them are taken whole."""
    rng = np.random.default_rng(11)
    n = 1500
    lengths = rng.integers(0, 6, n)
    lengths[[10, 11, 400, 401, 402, 1499]] = [5000, 3000, 9000, 1, 7000, 4000]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    ints = pa.array(rng.integers(0, 1 << 40, int(offsets[-1])))
    words = pa.array(rng.choice(np.array(["alpha", "beta", None, "gamma@example.com"], dtype=object), int(offsets[-1])))
    mask = pa.array(rng.random(n) < 0.1)
    table = pa.table({"ints": pa.ListArray.from_arrays(pa.array(offsets), ints, mask=mask),
                      "words": pa.ListArray.from_arrays(pa.array(offsets), words)})
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(table, uri, data_storage_version=version)
    idx = np.array([9, 10, 11, 12, 399, 400, 401, 402, 403, 1498, 1499, 0, 700, 11, 401])
    accel.use_compiled(compiled)
    try:
        assert lance_format.dataset(uri).take(idx).equals(lance.dataset(uri).take(idx))
        one = np.array([401])  # a one-item row between two long ones
        assert lance_format.dataset(uri).take(one).equals(lance.dataset(uri).take(one))
    finally:
        accel.use_compiled(None)


def test_chunk_table_kernel_matches_numpy_and_flags_bad_metadata():
    pytest.importorskip("numba")
    from lance_format.encodings.structural import numba_read_kernels as kernels
    from lance_format.encodings.structural.decode_miniblock import MiniBlockPage

    page = MiniBlockPage.__new__(MiniBlockPage)  # only the table's inputs are needed
    page.ctx = DecodeContext("f.lance", "tags")
    # 4 chunks of 1024, 1024, 512 and the rest (300) values; chunks 1 and 2 end inside a row, chunk 2
    # is wholly the continuation of the row chunk 1 leaves unfinished
    words = np.array([(3 << 4) | 10, (7 << 4) | 10, (1 << 4) | 9, (2 << 4) | 0], np.int64)
    index = np.array([[5, 0], [7, 12], [0, 30], [4, 0]], np.int64)
    page.num_items = 1024 + 1024 + 512 + 300
    for idx in (index, None):
        status, *got = kernels.chunk_table(words, page.num_items, np.zeros((0, 2), np.int64) if idx is None else idx,
                                           idx is not None)
        assert status == kernels.TABLE_OK
        for a, b in zip(got, page._chunk_table(words, idx)):
            assert np.array_equal(a, b)
    assert list(kernels.chunk_table(words, page.num_items, index, True)[6]) == [0, 3, 3, 3]
    # a middle chunk claiming 2^0 values, and more values than the page has
    bad = words.copy()
    bad[1] = 7 << 4
    assert kernels.chunk_table(bad, page.num_items, index, True)[0] == kernels.TABLE_ITEMS_MISMATCH
    assert kernels.chunk_table(words, 100, index, True)[0] == kernels.TABLE_ITEMS_MISMATCH
    with pytest.raises(LanceError, match="does not add up"):
        page._chunk_table(bad, None)
    # a preamble in a chunk without any row end: a negative row count
    assert kernels.chunk_table(words, page.num_items, np.array([[5, 1], [0, 0], [0, 30], [4, 0]]), True)[0] \
        == kernels.TABLE_INDEX_INCONSISTENT
