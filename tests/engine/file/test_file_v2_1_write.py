"""File versions 2.1/2.2: single files written by our writer read back equal in pylance.

pylance's own file reader (``lance.file.LanceFileReader``) is the oracle: every file must read
back identically (full read and ``take_rows``), whatever layout our writer picked. The layout
tests pin the choices the issue asks for (mini-block flat/variable/bit-packing/dictionary/RLE,
full-zip for wide values, constant for all-null and single-value pages).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader

from lance_format.file.container import read_file_metadata, unpack_any
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceSchema
from tests.engine.file.test_file_v2_0 import extra_columns
from tests.type_matrix import type_matrix

VERSIONS = ["2.1", "2.2"]


def nested_columns(n: int) -> dict[str, pa.Array]:
    """Nested and wide values only 2.1+ can hold (struct nulls) or that pick special layouts."""
    rng = np.random.default_rng(5)
    rows = range(n)

    def nulls_every(array: pa.Array, every: int) -> pa.Array:
        mask = np.zeros(len(array), np.bool_)
        mask[::every] = True
        return pa.array(array.to_pylist(), array.type, mask=mask) if not pa.types.is_nested(array.type) else (
            pa.array([None if m else v for v, m in zip(array.to_pylist(), mask)], array.type))

    vec128 = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 128, dtype=np.float32)), 128)
    vec768 = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 768, dtype=np.float32)), 768)
    return {
        "struct_nulls": pa.array(
            [None if i % 4 == 0 else {"x": None if i % 3 == 0 else i, "s": f"s{i}"} for i in rows],
            pa.struct([("x", pa.int32()), ("s", pa.string())]),
        ),
        "list_struct_list_str": pa.array(
            [
                None if i % 11 == 0 else [
                    None if j % 3 == 2 else {"a": [f"q{i}{k}" if k % 2 else None for k in range(j % 3)] if j % 4 else None}
                    for j in range(i % 4)
                ]
                for i in rows
            ],
            pa.list_(pa.struct([("a", pa.list_(pa.string()))])),
        ),
        "struct_of_list": pa.array(
            [None if i % 5 == 0 else {"l": [i] * (i % 3) if i % 4 else None} for i in rows],
            pa.struct([("l", pa.list_(pa.int32()))]),
        ),
        "vec128_nulls": nulls_every(vec128, 7),
        "vec768_nulls": nulls_every(vec768, 5),
        "long_str": nulls_every(pa.array(["L" * (1000 + i % 300) + str(i) for i in rows]), 9),
        "big_binary": pa.array([bytes(40_000) if i % 97 == 0 else b"x" * (i % 5) for i in rows], pa.large_binary()),
        "low_card_str": pa.array([["red", "green", "blue", None][i % 4] for i in rows]),
        "sorted_ints": pa.array(np.sort(rng.integers(0, 1000, n))),
        "runs": pa.array(np.repeat(np.arange(n // 100 + 1), 100)[:n].astype(np.int32)),
        "all_null_str": pa.nulls(n, pa.string()),
        "constant_float": pa.array([3.5] * n),
        "constant_str_nulls": pa.array([None if i % 3 else "abc" for i in rows]),
        "null_vs_empty": pa.array([None if i % 3 == 0 else [] if i % 3 == 1 else [i] for i in rows], pa.list_(pa.int64())),
        "list_bool": pa.array([[j % 2 == 0 for j in range(i % 5)] if i % 6 else None for i in rows], pa.list_(pa.bool_())),
        "list_fsl": pa.array([[[1.0, float(i)]] * (i % 3) if i % 4 else None for i in rows], pa.list_(pa.list_(pa.float32(), 2))),
        "list_long_str": pa.array(
            [[("z" * 300 if j % 2 else None) for j in range(i % 3)] if i % 5 else None for i in rows], pa.list_(pa.string())
        ),
        "list_vec": pa.array(
            [[[float(k) for k in range(80)]] * (i % 2) if i % 3 else None for i in rows], pa.list_(pa.list_(pa.float32(), 80))
        ),
        "unicode": pa.array(["héllo✓" * (i % 3) for i in rows]),
    }


def write_ours(tmp_path, table: pa.Table, version: str, *, batch_rows: int = 1000, **kwargs) -> str:
    store = ObjectStore(tmp_path)
    writer = LanceFileWriter(store, "ours.lance", LanceSchema.from_arrow(table.schema), version=version, **kwargs)
    for batch in table.to_batches(max_chunksize=batch_rows):
        writer.write_batch(batch)
    written = writer.finish()
    assert written.num_rows == table.num_rows
    return str(tmp_path / "ours.lance")


def assert_same(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.schema.names == expected.schema.names
    for name in expected.schema.names:
        got, want = actual.column(name), expected.column(name)
        assert got.type == want.type, name
        if pa.types.is_dictionary(want.type):
            # the same values may be dictionary-encoded differently; compare them decoded
            got, want = (pa.chunked_array([c.dictionary_decode() for c in x.chunks], x.type.value_type) for x in (got, want))
        got, want = got.combine_chunks(), want.combine_chunks()
        assert got.equals(want), f"{name}: {got.to_pylist()[:5]} != {want.to_pylist()[:5]}"


def read_back(path: str) -> pa.Table:
    return PyReader(path).read_all().to_table()


def layouts(path: str, tmp_path) -> dict[int, list[pb.PageLayout]]:
    store = ObjectStore(tmp_path)
    rel = path.rsplit("/", 1)[1]
    with store.open_input(rel) as f:
        meta = read_file_metadata(f, store.size(rel), path=rel)
    return {
        index: [unpack_any(p.encoding.direct.encoding, pb.PageLayout) for p in column.pages]
        for index, column in enumerate(meta.columns)
    }


def describe(layout: pb.PageLayout) -> str:
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        mini = layout.mini_block_layout
        name = mini.value_compression.WhichOneof("compression")
        return f"mini_block:{name}" + ("+dictionary" if mini.HasField("dictionary") else "")
    if kind == "constant_layout":
        return "constant:" + ("value" if layout.constant_layout.HasField("inline_value") else "no-inline")
    return kind


# -- round trips ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("max_page_bytes", [8 << 20, 4096], ids=["one-page", "many-pages"])
def test_type_matrix_reads_back_in_pylance(tmp_path, version, max_page_bytes):
    table = type_matrix(700)
    extra = extra_columns(700)
    table = pa.table({**{n: table.column(n) for n in table.column_names}, **extra})
    path = write_ours(tmp_path, table, version, batch_rows=300, max_page_bytes=max_page_bytes)
    reader = PyReader(path)
    assert (reader.metadata().major_version, reader.metadata().minor_version) == (2, int(version[-1]))
    assert_same(read_back(path), table)
    rows = [0, 1, 299, 300, 301, 511, 512, 699]
    assert_same(reader.take_rows(rows).to_table(), table.take(rows))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("max_page_bytes", [8 << 20, 20_000], ids=["one-page", "many-pages"])
def test_nested_and_wide_columns_read_back_in_pylance(tmp_path, version, max_page_bytes):
    table = pa.table(nested_columns(1200))
    path = write_ours(tmp_path, table, version, batch_rows=500, max_page_bytes=max_page_bytes)
    assert_same(read_back(path), table)
    rows = [0, 3, 499, 500, 777, 1199]
    assert_same(PyReader(path).take_rows(rows).to_table(), table.take(rows))


@pytest.mark.parametrize("version", VERSIONS)
def test_sliced_inputs_and_garbage_under_nulls(tmp_path, version):
    garbage_list = pa.ListArray.from_arrays(
        pa.array([0, 2, 5, 5, 8, 10], pa.int32()), pa.array(range(10), pa.int64()),
        mask=pa.array([False, True, False, True, False]),
    )
    garbage_struct = pa.StructArray.from_arrays(
        [pa.array(["a" * 300, "b", "c" * 500, "d", "e"]), pa.array([1, 2, 3, 4, 5])], names=["s", "i"],
        mask=pa.array([False, True, True, False, False]),
    )
    big = nested_columns(400)
    table = pa.table({
        "garbage_list": garbage_list,
        "garbage_struct": garbage_struct,
        "sliced_str": big["long_str"].slice(37, 5),
        "sliced_list": big["list_struct_list_str"].slice(101, 5),
        "sliced_struct": big["struct_nulls"].slice(3, 5),
    })
    path = write_ours(tmp_path, table, version)
    back = read_back(path)
    assert back.column("garbage_list").to_pylist() == [[0, 1], None, [], None, [8, 9]]
    assert back.column("garbage_struct").to_pylist() == garbage_struct.to_pylist()
    assert_same(back, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_dense_empty_lists_and_long_runs(tmp_path, version):
    many_empty = [[]] * 40_000 + [[1, 2]] + [[]] * 40_000 + [[3]]
    table = pa.table({
        "many_empty": pa.array(many_empty, pa.list_(pa.int64())),
        "many_empty_str": pa.array(many_empty, pa.list_(pa.int64())).cast(pa.list_(pa.string())),
        "many_empty_bool": pa.array([[]] * 80_000 + [[True], [False, True]], pa.list_(pa.bool_())),
        "big_run": pa.array(np.repeat(np.arange(3), 30_000)[:80_002].astype(np.int64)),
    })
    path = write_ours(tmp_path, table, version, batch_rows=100_000)
    assert_same(read_back(path), table)
    one_row = pa.table({"nested_empty": pa.array([[[]] * 50_000 + [[1]]], pa.list_(pa.list_(pa.int32())))})
    path = write_ours(tmp_path, one_row, version)
    assert_same(read_back(path), one_row)


@pytest.mark.parametrize("version", VERSIONS)
def test_zero_rows_and_all_null(tmp_path, version):
    empty = pa.table({"a": pa.array([], pa.int32()), "l": pa.array([], pa.list_(pa.string()))})
    path = write_ours(tmp_path, empty, version)
    assert PyReader(path).num_rows() == 0
    nulls = pa.table({
        "n": pa.nulls(50, pa.int64()),
        "s": pa.array([None] * 50, pa.struct([("x", pa.int32())])),
        "l": pa.array([None, []] * 25, pa.list_(pa.int32())),
    })
    path = write_ours(tmp_path, nulls, version)
    assert_same(read_back(path), nulls)
    assert {describe(p[0]) for p in layouts(path, tmp_path).values()} == {"constant:no-inline"}


# -- layouts ---------------------------------------------------------------------------------------


def test_layout_choices_2_2(tmp_path):
    n = 5000
    table = pa.table({
        "ids": pa.array(np.arange(n, dtype=np.int64)),
        "floats": pa.array(np.random.default_rng(1).standard_normal(n)),
        "names": pa.array([f"user_{i}" for i in range(n)]),
        "cats": pa.array([f"category-{i % 20}" for i in range(n)]),
        "runs": pa.array(np.repeat(np.arange(n // 3 + 1), 3)[:n].astype(np.int64) * 1_000_003),
        "runs_low_card": pa.array(np.repeat(np.arange(50), 100).astype(np.int64) * 1_000_003),
        "vectors": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(n * 128, np.float32)), 128),
        "long": pa.array(["x" * 300 + str(i) for i in range(n)]),
        "all_null": pa.nulls(n, pa.int32()),
        "constant": pa.array([7] * n, pa.int64()),
        "flags": pa.array(np.arange(n) % 3 == 0),
    })
    path = write_ours(tmp_path, table, "2.2", batch_rows=n)
    assert_same(read_back(path), table)
    got = {name: describe(pages[0]) for name, pages in zip(table.column_names, layouts(path, tmp_path).values())}
    assert got == {
        "ids": "mini_block:inline_bitpacking",
        "floats": "mini_block:flat",
        "names": "mini_block:fsst",
        "cats": "mini_block:inline_bitpacking+dictionary",
        "runs": "mini_block:rle",
        "runs_low_card": "mini_block:rle+dictionary",
        "vectors": "full_zip_layout",
        "long": "full_zip_layout",
        "all_null": "constant:no-inline",
        "constant": "constant:value",
        "flags": "mini_block:flat",
    }


def test_constant_layout_is_2_2_only(tmp_path):
    table = pa.table({"c": pa.array([7] * 300, pa.int64()), "s": pa.array(["same"] * 300)})
    path = write_ours(tmp_path, table, "2.1")
    assert_same(read_back(path), table)
    assert all(describe(p[0]).startswith("mini_block") for p in layouts(path, tmp_path).values())
    path = write_ours(tmp_path, table, "2.2")
    assert_same(read_back(path), table)
    assert [describe(p[0]) for p in layouts(path, tmp_path).values()] == ["constant:value", "constant:no-inline"]


@pytest.mark.parametrize("version", VERSIONS)
def test_mini_block_chunk_grammar(tmp_path, version):
    """Chunk metadata words, power-of-two chunks, 8-byte alignment and the 2.1 size limit."""
    n = 20_000
    table = pa.table({
        "i": pa.array(np.arange(n) * 7, pa.int64()),
        "s": pa.array([None if i % 9 == 0 else "v" * (i % 50) for i in range(n)]),
        "l": pa.array([list(range(i % 6)) if i % 4 else None for i in range(n)], pa.list_(pa.int32())),
    })
    write_ours(tmp_path, table, version, batch_rows=n)
    store = ObjectStore(tmp_path)
    with store.open_input("ours.lance") as f:
        meta = read_file_metadata(f, store.size("ours.lance"), path="ours.lance")
        raw = f.read_at(meta.file_size, 0)
    word_type = "<u2" if version == "2.1" else "<u4"
    for column in meta.columns:
        for page in column.pages:
            layout = unpack_any(page.encoding.direct.encoding, pb.PageLayout).mini_block_layout
            assert layout.has_large_chunk == (version == "2.2")
            words = np.frombuffer(raw, word_type, page.buffer_sizes[0] // np.dtype(word_type).itemsize,
                                  page.buffer_offsets[0])
            sizes = ((words >> 4) + 1) * 8
            logs = words & 0xF
            assert int(sizes.sum()) == page.buffer_sizes[1]
            assert (logs[:-1] > 0).all() and logs[-1] == 0
            assert int((1 << logs[:-1].astype(np.int64)).sum()) < layout.num_items
            if version == "2.1":
                assert sizes.max() <= 32 * 1024


@pytest.mark.parametrize("version", VERSIONS)
def test_pages_and_priorities(tmp_path, version):
    n = 10_000
    table = pa.table({"i": pa.array(np.arange(n), pa.int64()), "s": pa.array([str(i) for i in range(n)])})
    path = write_ours(tmp_path, table, version, batch_rows=1000, max_page_bytes=20_000)
    store = ObjectStore(tmp_path)
    with store.open_input("ours.lance") as f:
        meta = read_file_metadata(f, store.size("ours.lance"), path="ours.lance")
    assert meta.version == (2, int(version[-1]))
    for column in meta.columns:
        assert len(column.pages) > 3
        first_rows = np.cumsum([0] + [p.length for p in column.pages])[:-1]
        assert [p.priority for p in column.pages] == first_rows.tolist()
        assert sum(p.length for p in column.pages) == n
    assert_same(read_back(path), table)


@pytest.mark.parametrize("version", VERSIONS)
def test_random_access_into_list_pages(tmp_path, version):
    """take/read_range across many chunks rely on our repetition index (rows + leftovers)."""
    n = 30_000
    table = pa.table({
        "l": pa.array([list(range(i % 13)) if i % 7 else ([] if i % 2 else None) for i in range(n)], pa.list_(pa.int64())),
        "ll": pa.array([[[j] * (j % 3) for j in range(i % 4)] if i % 5 else None for i in range(n)],
                       pa.list_(pa.list_(pa.int32()))),
        "ls": pa.array([[f"x{j}" * (j % 5) for j in range(i % 6)] for i in range(n)], pa.list_(pa.string())),
        "lb": pa.array([["y" * 300] * (i % 3) for i in range(n)], pa.list_(pa.string())),
    })
    path = write_ours(tmp_path, table, version, batch_rows=n, max_page_bytes=200_000)
    reader = PyReader(path)
    rows = np.sort(np.random.default_rng(0).choice(n, 300, replace=False)).tolist()
    assert_same(reader.take_rows(rows).to_table(), table.take(rows))
    assert_same(reader.read_range(12_345, 4_000).to_table(), table.slice(12_345, 4_000))


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_across_pages_whose_nulls_differ(tmp_path, version):
    """Nulls of structs above lists only in some pages: every read range must still work.

    With layers chosen from each page's data, pylance's reader fails on such reads (it does on
    files its own writer makes that way); our writer keeps those layers the same in every page.
    """
    n = 1200
    data_type = pa.struct([("l", pa.list_(pa.int32())), ("s", pa.struct([("x", pa.list_(pa.string()))]))])
    rows = [
        None if i < 300 and i % 7 == 0 else {
            "l": None if i < 300 and i % 5 == 0 else [i] * (i % 3),
            "s": None if i < 300 and i % 11 == 0 else {"x": [str(i)] * (i % 2) if i % 13 else None},
        }
        for i in range(n)
    ]
    table = pa.table({"c": pa.array(rows, data_type)})
    path = write_ours(tmp_path, table, version, batch_rows=n, max_page_bytes=1000)
    reader = PyReader(path)
    assert_same(reader.read_all(batch_size=100).to_table(), table)
    for start in range(200, 800, 37):
        assert_same(reader.read_range(start, 61).to_table(), table.slice(start, 61))


@pytest.mark.parametrize("version", VERSIONS)
def test_constant_pages_of_every_kind(tmp_path, version):
    import decimal

    n = 500
    table = pa.table({
        "bool": pa.array([True] * n),
        "bool_nulls": pa.array([None if i % 3 else False for i in range(n)]),
        "decimal128": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(10, 2)),
        "decimal256": pa.array([decimal.Decimal("1.25")] * n, pa.decimal256(40, 2)),
        "large_string": pa.array(["hello"] * n, pa.large_string()),
        "binary": pa.array([b"\x00\x01"] * n),
        "large_binary_nulls": pa.array([None if i % 2 else b"xy" for i in range(n)], pa.large_binary()),
        "float16": pa.array([1.5] * n, pa.float16()),
        "fixed_binary": pa.array([b"abc"] * n, pa.binary(3)),
        "empty_string": pa.array([""] * n),
        "timestamp": pa.array([1] * n, pa.timestamp("us", "UTC")),
        "list_of_constants": pa.array([[1, 1]] * n, pa.list_(pa.int8())),
    })
    path = write_ours(tmp_path, table, version, batch_rows=n)
    assert_same(read_back(path), table)
    kinds = {describe(pages[0]).split(":")[0] for pages in layouts(path, tmp_path).values()}
    assert kinds == ({"constant"} if version == "2.2" else {"mini_block"})


# -- FSST --------------------------------------------------------------------------------------------


def realistic_strings(n: int, seed: int = 11) -> pa.Table:
    """String shapes pylance compresses with FSST (and a few it does not)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "naïve", "café", "東京", "Grüße", "✓ok", "🚀x"]
    pick = rng.integers(0, len(words), (n, 3))
    url = [f"https://shop.example.com/{words[a]}/item-{i:06d}?ref={words[b]}" for i, (a, b, _) in enumerate(pick)]
    email = [None if i % 13 == 0 else ("" if i % 17 == 0 else f"customer-{i:06d}@{words[c]}.example.org")
             for i, (_, _, c) in enumerate(pick)]
    json_text = [f'{{"id": {i}, "kind": "{words[a]}", "score": {rng.random():.3f}, "tags": ["{words[b]}"]}}'
                 for i, (a, b, _) in enumerate(pick)]
    return pa.table({
        "url": pa.array(url),
        "email_nulls_empty": pa.array(email),
        "json": pa.array(json_text, pa.large_string()),
        "utf8": pa.array([" ".join(words[k] for k in row) for row in pick.tolist()]),
        "escapes": pa.array(["\x7f\u00ff" + chr(0x100 + i % 500) + "ÿ" * (i % 4) for i in range(n)]),
        "long_text": pa.array([None if i % 5 == 0 else (url[i] + " ") * (5 + i % 20) for i in range(n)]),
        "list_urls": pa.array([[u, u[::-1]] if i % 4 else None for i, u in enumerate(url)], pa.list_(pa.string())),
        "struct_email": pa.array([{"e": e} for e in email], pa.struct([("e", pa.string())])),
        "binary": pa.array([u.encode() for u in url], pa.binary()),  # binary: never FSST
        "short": pa.array([str(i % 9999) for i in range(n)]),  # longest value under 5 bytes: never FSST
        "category": pa.array([words[a] for a, _, _ in pick.tolist()]),  # few values: a dictionary
    })


def compression_of(layout: pb.PageLayout) -> str:
    """Layout and value compression (FSST visible in mini-block and full-zip pages, and how a
    dictionary is stored: plain in 2.1, LZ4 ``general`` in 2.2)."""
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        mini = layout.mini_block_layout
        dictionary = mini.dictionary.WhichOneof("compression") if mini.HasField("dictionary") else ""
        return describe(layout) + (f"({dictionary})" if dictionary else "")
    if kind == "full_zip_layout":
        return "full_zip:" + layout.full_zip_layout.value_compression.WhichOneof("compression")
    return describe(layout)


@pytest.mark.parametrize("version", VERSIONS)
def test_fsst_strings_read_back_in_pylance(tmp_path, version):
    table = realistic_strings(4000)
    path = write_ours(tmp_path, table, version, batch_rows=1500)
    kinds = [compression_of(p[0]) for p in layouts(path, tmp_path).values()]
    assert kinds.count("mini_block:fsst") >= 5 and "full_zip:fsst" in kinds
    reader = PyReader(path)
    assert_same(reader.read_all(batch_size=333).to_table(), table)
    rows = [0, 1, 13, 17, 999, 1500, 2047, 2048, 3999]
    assert_same(reader.take_rows(rows).to_table(), table.take(rows))


@pytest.mark.parametrize("version", VERSIONS)
def test_fsst_pages_of_pylance_read_back_in_ours(tmp_path, version):
    """The other direction: pylance's FSST pages of the same strings decode identically here."""
    from lance.file import LanceFileWriter as PyWriter

    from lance_format.file.plans import structural_plans_for_schema
    from lance_format.file.reader import LanceFileReader

    table = realistic_strings(4000)
    with PyWriter(str(tmp_path / "theirs.lance"), table.schema, version=version) as writer:
        for batch in table.to_batches(max_chunksize=1500):
            writer.write_batch(batch)
    kinds = [compression_of(p[0]) for p in layouts(str(tmp_path / "theirs.lance"), tmp_path).values()]
    assert kinds.count("mini_block:fsst") >= 5 and "full_zip:fsst" in kinds
    with LanceFileReader(ObjectStore(tmp_path), "theirs.lance") as ours:
        plans = structural_plans_for_schema(ours.lance_schema())
        arrays = ours.read_range(plans, 0, table.num_rows)
        assert_same(pa.table(arrays, names=table.column_names), table)
        rows = np.array([0, 13, 17, 2048, 3999])
        assert_same(pa.table(ours.take(plans, rows), names=table.column_names), table.take(rows))


@pytest.mark.parametrize("version", VERSIONS)
def test_fsst_choice_matches_pylance_per_column(tmp_path, version):
    from lance.file import LanceFileWriter as PyWriter

    table = realistic_strings(4000)
    small = realistic_strings(300)  # under 32 KiB per column: pylance keeps the strings plain
    for name, data in (("big", table), ("small", small)):
        folder = tmp_path / name
        folder.mkdir()
        ours = write_ours(folder, data, version, batch_rows=data.num_rows)
        theirs = str(folder / "theirs.lance")
        with PyWriter(theirs, data.schema, version=version) as writer:
            for batch in data.to_batches():
                writer.write_batch(batch)
        ours_kinds = [compression_of(p[0]) for p in layouts(ours, folder).values()]
        theirs_kinds = [compression_of(p[0]) for p in layouts(theirs, folder).values()]
        assert ours_kinds == theirs_kinds, name


def choice_candidates(n: int, seed: int = 5) -> pa.Table:
    """Columns around pylance's dictionary, RLE and bit-packing thresholds."""
    import decimal

    rng = np.random.default_rng(seed)

    def runs(mean_length: float) -> np.ndarray:
        lengths = rng.geometric(1 / mean_length, n)
        return np.repeat(rng.integers(-2**62, 2**62, len(lengths)), lengths)[:n]

    cats = np.array([f"kind-{k}" for k in range(40)])
    sku = pa.array([f"sku-{k}" for k in rng.integers(0, 2500, n)])
    return pa.table({
        "cat_nulls": pa.array([None if i % 3 == 0 else cats[i % 40] for i in range(n)]),
        "cat_large": pa.array(cats[rng.integers(0, 40, n)], pa.large_string()),
        "bin_lowcard": pa.array([b"k%d" % (i % 30) for i in range(n)], pa.binary()),
        "f64_lowcard": pa.array(rng.integers(0, 30, n) * 0.5),
        "i32_lowcard": pa.array(rng.integers(0, 30, n).astype(np.int32) * 100_000),  # 32-bit: never
        "i64_lowcard": pa.array(rng.integers(0, 30, n) * 1_000_000_007),  # 64-bit: 2.2 only
        "ts_lowcard": pa.array(rng.integers(0, 30, n) * 1_000_000_000_000, pa.timestamp("us")),
        "tags": pa.array([[cats[(i + j) % 40] for j in range(i % 3)] for i in range(n)], pa.list_(pa.string())),
        "struct_cat": pa.array([{"c": cats[i % 7]} for i in range(n)], pa.struct([("c", pa.string())])),
        "sku_mid": sku,  # about n / 2.4 distinct values: over the sample estimate's budget
        "sku_sorted": sku.take(pa.compute.sort_indices(sku)),  # same values, few in the first 4096
        "short_mid": pa.array([str(i % 1000) for i in range(n)]),  # saves too little
        "dec_lowcard": pa.array([decimal.Decimal(i % 20) for i in range(n)], pa.decimal128(10, 2)),
        "runs_short": pa.array(runs(1.5)),  # RLE by size even with more runs than half the values
        "runs_long": pa.array(runs(3.0)),
        "unit_floats": pa.array(rng.random(n)),  # two zero high bits: bit-packed
        "normal_floats": pa.array(rng.standard_normal(n)),  # sign bit set: flat
        "wide_ints": pa.array(rng.integers(0, 2**60, n)),  # 60 bits of 64: bit-packed
    })


@pytest.mark.parametrize("version", VERSIONS)
def test_dictionary_rle_and_bitpacking_choices_match_pylance_per_column(tmp_path, version):
    from lance.file import LanceFileWriter as PyWriter

    table = choice_candidates(6000)
    ours = write_ours(tmp_path, table, version, batch_rows=table.num_rows)
    theirs = str(tmp_path / "theirs.lance")
    with PyWriter(theirs, table.schema, version=version) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    ours_kinds = [compression_of(p[0]) for p in layouts(ours, tmp_path).values()]
    assert ours_kinds == [compression_of(p[0]) for p in layouts(theirs, tmp_path).values()]
    assert sum("+dictionary" in k for k in ours_kinds) >= 7
    assert_same(read_back(ours), table)


@pytest.mark.parametrize("version", VERSIONS)
def test_compiled_kernels_write_the_same_file_bytes(tmp_path, version):
    """numba (the `fast` extra) only accelerates: FSST pages, RLE, dictionaries, lists and the
    mini-block chunking come out byte for byte as with numpy alone."""
    pytest.importorskip("numba")
    if os.environ.get("LANCE_FORMAT_JIT") == "0":
        pytest.skip("LANCE_FORMAT_JIT=0 keeps the numpy code")
    from lance_format.encodings.structural import accel

    strings = realistic_strings(6000)
    candidates = choice_candidates(6000)
    table = pa.table({**{name: strings.column(name) for name in strings.column_names},
                      **{f"c_{name}": candidates.column(name) for name in candidates.column_names}})
    files = {}
    try:
        for compiled in (False, True):
            accel.use_compiled(compiled)
            assert (accel.kernels() is not None) == compiled
            folder = tmp_path / str(compiled)
            folder.mkdir()
            path = write_ours(folder, table, version, batch_rows=2500)
            files[compiled] = (folder / "ours.lance").read_bytes()
    finally:
        accel.use_compiled(None)
    kinds = [compression_of(p[0]) for p in layouts(path, tmp_path / "True").values()]
    assert "mini_block:fsst" in kinds and "full_zip:fsst" in kinds
    assert files[True] == files[False]
