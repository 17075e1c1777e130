"""Lance file versions 2.1/2.2: files pylance's single-file writer produces read back identically.

Covers the default encodings (mini-block with FastLanes, RLE, FSST, dictionaries; full-zip;
constant pages), opt-in ones chosen through field metadata (general lz4/zstd, byte-stream-split,
packed and variable packed structs, blobs, forced structural encodings), multi-page columns,
row ranges and takes (which must decode only the chunks they need).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyReader
from lance.file import LanceFileWriter as PyWriter

from lance_format.encodings.structural import miniblock
from lance_format.file import ColumnPlan
from lance_format.file.container import encoding_bytes, read_file_metadata, unpack_any
from lance_format.file.plans import structural_plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb
from tests.engine.file.test_file_v2_0 import _plain, matrix

VERSIONS = ["2.1", "2.2"]
REL = "f.lance"


# -- helpers -----------------------------------------------------------------------------------


def extras(n: int, seed: int = 3) -> pa.Table:
    """Data shapes that steer pylance to each of its default encodings."""
    rng = np.random.default_rng(seed)

    def holes(values: list, every: int = 7) -> list:
        return [None if i % every == 3 else v for i, v in enumerate(values)]

    words = [f"w{i}" for i in range(20)]
    lsls_type = pa.list_(pa.struct([("k", pa.int32()), ("tags", pa.list_(pa.string()))]))
    lsls = [
        None if i % 11 == 0 else [
            None if (i + j) % 5 == 0 else {
                "k": None if j == 2 else i * 10 + j,
                "tags": None if (i + j) % 6 == 0 else [f"t{i}_{k}" if k % 3 else None for k in range((i + j) % 3)],
            }
            for j in range(i % 4)
        ]
        for i in range(n)
    ]
    return pa.table({
        "sorted_i64": pa.array(np.arange(n, dtype=np.int64) * 3),
        "random_i64": pa.array(rng.integers(-2**62, 2**62, n)),
        "small_i32_nulls": pa.array(holes(rng.integers(0, 50, n).tolist()), pa.int32()),
        "runs_i64": pa.array(np.repeat(np.arange(n // 100 + 1), 100)[:n].astype(np.int64)),
        "random_f64": pa.array(rng.standard_normal(n)),
        "random_f32_nulls": pa.array(holes(rng.random(n).astype(np.float32).tolist()), pa.float32()),
        "lowcard_str": pa.array([words[i % 20] for i in range(n)]),
        "lowcard_str_nulls": pa.array(holes([words[i % 20] for i in range(n)])),
        "entropy_str": pa.array(["".join(chr(97 + c) for c in rng.integers(0, 26, 20)) for _ in range(n)]),
        "text": pa.array(holes([f"lorem ipsum dolor sit amet {i} " * (1 + i % 4) for i in range(n)])),
        "long_str": pa.array(holes([f"x{i}" + "y" * (1100 + i % 50) for i in range(n)], 5)),
        "binary": pa.array(holes([rng.bytes(int(k)) for k in rng.integers(0, 40, n)]), pa.binary()),
        "vec128": pa.array(holes([rng.random(128).astype(np.float32) for _ in range(n)], 9), pa.list_(pa.float32(), 128)),
        "vec768": pa.array(holes([rng.random(768).astype(np.float32) for _ in range(n)], 9), pa.list_(pa.float32(), 768)),
        "st": pa.array(
            [None if i % 6 == 0 else {"a": None if i % 4 == 0 else i, "b": f"b{i}", "c": None if i % 9 == 0 else [i, i + 1]}
             for i in range(n)],
            pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.list_(pa.int32()))]),
        ),
        "list_int": pa.array([None if i % 8 == 0 else ([] if i % 8 == 1 else list(range(i % 5))) for i in range(n)],
                             pa.list_(pa.int64())),
        "list_str": pa.array(
            [None if i % 8 == 0 else ([] if i % 8 == 1 else [None if j == 1 else f"s{i}_{j}" for j in range(i % 4)])
             for i in range(n)], pa.list_(pa.string())),
        "list_struct": pa.array(
            [None if i % 10 == 0 else [None if j == 1 else {"x": i + j, "y": None if j == 2 else float(j)} for j in range(i % 4)]
             for i in range(n)], pa.list_(pa.struct([("x", pa.int32()), ("y", pa.float64())]))),
        "list_struct_list_str": pa.array(lsls, lsls_type),
        "nested3": pa.array(
            [None if i % 13 == 0 else [[None if (i + k) % 7 == 0 else list(range(k % 3)) for k in range(j)] for j in range(i % 3)]
             for i in range(n)], pa.list_(pa.list_(pa.list_(pa.int16())))),
        "list_long_str": pa.array(
            [None if i % 6 == 0 else [f"{i}-{j}-" + "L" * (400 + j) for j in range(i % 3)] for i in range(n)],
            pa.list_(pa.string())),
        "list_vec": pa.array(
            [None if i % 6 == 0 else [rng.random(64).astype(np.float32) for _ in range(i % 3)] for i in range(n)],
            pa.list_(pa.list_(pa.float32(), 64))),
        "all_null_str": pa.nulls(n, pa.string()),
        "all_null_list": pa.nulls(n, pa.list_(pa.int32())),
        "const_i64": pa.array(np.full(n, 42, np.int64)),
        "const_str": pa.array(["same-value"] * n),
        "const_str_nulls": pa.array(holes(["same-value"] * n)),
        "const_bool": pa.array([True] * n),
        "fsl_item_nulls": pa.array([None if i % 5 == 0 else [i, None if i % 3 == 0 else i + 1, i + 2] for i in range(n)],
                                   pa.list_(pa.int32(), 3)),
        "bool_nulls": pa.array(holes((rng.random(n) > 0.5).tolist()), pa.bool_()),
        "large_list_str": pa.array([None if i % 9 == 0 else [f"q{j}" for j in range(i % 3)] for i in range(n)],
                                   pa.large_list(pa.large_string())),
    })


def write(path, table: pa.Table, version: str, *, batch_rows: int = 700, **kwargs) -> None:
    with PyWriter(str(path), table.schema, version=version, **kwargs) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)


def reader(tmp_path) -> LanceFileReader:
    return LanceFileReader(ObjectStore(tmp_path), REL)


def layouts(path) -> dict[int, set[str]]:
    """Per column: the page layouts and compressions used (e.g. 'mini_block_layout', 'fsst')."""
    out: dict[int, set[str]] = {}
    with pa.OSFile(str(path)) as f:
        meta = read_file_metadata(f, f.size(), path=REL)
        for index, column in enumerate(meta.columns):
            kinds = out.setdefault(index, set())
            for page in column.pages:
                layout = unpack_any(encoding_bytes(page.encoding, f, path=REL, column=None), pb.PageLayout)
                kinds.add(layout.WhichOneof("layout"))
                _collect(layout, kinds)
    return out


def _collect(message, kinds: set[str]) -> None:
    for descriptor, value in message.ListFields():
        if descriptor.message_type is None:
            continue
        values = value if descriptor.is_repeated else [value]
        if descriptor.name == "dictionary" and isinstance(message, pb.MiniBlockLayout):
            kinds.add("dictionary")
        for item in values:
            if isinstance(item, pb.CompressiveEncoding):
                kinds.add(item.WhichOneof("compression"))
            _collect(item, kinds)


def check_reads(tmp_path, table: pa.Table, *, take_rows: int = 60) -> LanceFileReader:
    """Whole file, a row range and an unsorted take with duplicates, column by column."""
    r = reader(tmp_path)
    n = table.num_rows
    rng = np.random.default_rng(1)
    idx = rng.choice(n, min(take_rows, n), replace=False)
    idx = np.concatenate([idx, idx[:3]])
    lo, hi = n // 5, n - n // 7
    for plan in structural_plans_for_schema(r.lance_schema()):
        name = plan.field.name
        expected = _plain(table.column(name))
        assert _plain(r.read_range([plan], 0, n)[0]).equals(expected), name
        assert _plain(r.read_range([plan], lo, hi)[0]).equals(expected.slice(lo, hi - lo)), name
        assert _plain(r.take([plan], idx)[0]).equals(expected.take(pa.array(idx))), name
        for empty in (r.read_range([plan], lo, lo)[0], r.take([plan], [])[0]):
            assert len(empty) == 0 and empty.type == plan.field.type, name
    return r


# -- default encodings -------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("nulls", [False, True], ids=["no-nulls", "nulls"])
def test_type_matrix(tmp_path, version, nulls):
    table = matrix(300, nulls=nulls)
    write(tmp_path / REL, table, version)
    r = check_reads(tmp_path, table)
    assert r.version == (2, int(version[-1]))
    theirs = PyReader(str(tmp_path / REL)).read_all().to_table()
    ours = r.read_range(structural_plans_for_schema(r.lance_schema()), 0, r.num_rows)
    for name, array in zip(table.column_names, ours):
        assert _plain(array).equals(_plain(theirs.column(name))), name


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("small_pages", [False, True], ids=["default-pages", "small-pages"])
def test_extras_and_multi_page_columns(tmp_path, version, small_pages):
    table = extras(3000)
    # pylance cuts a page whenever a column has buffered data_cache_bytes
    kwargs = {"max_page_bytes": 16384, "data_cache_bytes": 4096, "batch_rows": 300} if small_pages else {}
    write(tmp_path / REL, table, version, **kwargs)
    check_reads(tmp_path, table)
    kinds = set().union(*layouts(tmp_path / REL).values())
    assert {"mini_block_layout", "full_zip_layout", "constant_layout", "fsst", "inline_bitpacking", "rle",
            "dictionary", "fixed_size_list", "variable"} <= kinds
    if small_pages:
        with pa.OSFile(str(tmp_path / REL)) as f:
            meta = read_file_metadata(f, f.size(), path=REL)
        pages = [len(c.pages) for c in meta.columns]
        assert min(pages) >= 5
        busiest = meta.columns[int(np.argmax(pages))]
        priorities = [p.priority for p in busiest.pages]
        assert priorities == list(np.cumsum([0] + [p.length for p in busiest.pages[:-1]]))


@pytest.mark.parametrize("version", VERSIONS)
def test_fsst_with_escapes(tmp_path, version):
    rng = np.random.default_rng(2)
    values = ["common-prefix-" + "".join(chr(c) for c in rng.integers(0x100, 0x3000, 6)) + f"-{i}" + "ÿ" * (i % 3)
              for i in range(20000)]
    table = pa.table({"s": pa.array(values)})
    write(tmp_path / REL, table, version)
    assert "fsst" in layouts(tmp_path / REL)[0]
    check_reads(tmp_path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_zero_rows(tmp_path, version):
    table = matrix(10).slice(0, 0)
    with PyWriter(str(tmp_path / REL), table.schema, version=version):
        pass
    r = reader(tmp_path)
    assert r.num_rows == 0
    for plan, array in zip(structural_plans_for_schema(r.lance_schema()),
                           r.read_range(structural_plans_for_schema(r.lance_schema()), 0, 0)):
        assert len(array) == 0 and array.type == plan.field.type


# -- opt-in encodings ----------------------------------------------------------------------------


def _field(name: str, data_type: pa.DataType, **metadata: str) -> pa.Field:
    return pa.field(name, data_type, metadata={f"lance-encoding:{k.replace('_', '-')}": v for k, v in metadata.items()})


def opt_in_table(n: int, version: str) -> tuple[pa.Table, dict[str, str]]:
    """Columns with encoding metadata, and the compression each must end up using."""
    rng = np.random.default_rng(5)
    packed = pa.struct([("a", pa.int32()), ("b", pa.float64()), ("c", pa.int64())])
    columns = [
        (_field("i_zstd", pa.int64(), compression="zstd"), pa.array(rng.integers(0, 1000, n)), "general"),
        (_field("i_lz4", pa.int64(), compression="lz4"), pa.array([None if i % 7 == 0 else i for i in range(n)], pa.int64()),
         "general"),
        (_field("f_bss", pa.float64(), compression="zstd", bss="on"), pa.array(rng.standard_normal(n)), "byte_stream_split"),
        (_field("s_zstd", pa.string(), compression="zstd"),
         pa.array(["".join(chr(97 + c) for c in rng.integers(0, 26, 30)) for _ in range(n)]), "general"),
        (_field("long_zstd", pa.string(), compression="zstd"),
         pa.array([None if i % 11 == 0 else "y" * (300 + i % 100) + str(i) for i in range(n)]), "general"),
        (_field("packed", packed, packed="true"),
         pa.array([None if i % 9 == 0 else {"a": i, "b": i / 3, "c": -i} for i in range(n)], packed), "packed_struct"),
        (_field("fz_int", pa.int64(), structural_encoding="fullzip"),
         pa.array([None if i % 5 == 0 else i * 7 for i in range(n)], pa.int64()), "full_zip_layout"),
        (_field("fz_list", pa.list_(pa.string()), structural_encoding="fullzip"),
         pa.array([None if i % 5 == 0 else [f"v{i}"] * (i % 4) for i in range(n)], pa.list_(pa.string())), "full_zip_layout"),
        (_field("fz_list_int", pa.list_(pa.int32()), structural_encoding="fullzip"),
         pa.array([None if i % 5 == 0 else [None if j == 1 else i for j in range(i % 4)] for i in range(n)],
                  pa.list_(pa.int32())), "full_zip_layout"),
        (_field("mb_vec", pa.list_(pa.float32(), 128), structural_encoding="miniblock"),
         pa.array([None if i % 4 == 0 else rng.random(128).astype(np.float32) for i in range(n)], pa.list_(pa.float32(), 128)),
         "mini_block_layout"),
        (_field("nodict", pa.string(), dict_divisor="100000"), pa.array([f"w{i % 5}" for i in range(n)]), "variable"),
    ]
    if version == "2.2":
        loose = pa.struct([("a", pa.int32()), ("s", pa.string()), ("b", pa.binary())])
        columns.append((_field("vpacked", loose, packed="true"),
                        pa.array([None if i % 9 == 0 else {"a": i, "s": "s" * (i % 5), "b": b"b" * (i % 3)} for i in range(n)],
                                 loose), "variable_packed_struct"))
    schema = pa.schema([c[0] for c in columns])
    table = pa.table([c[1] for c in columns], schema=schema)
    return table, {c[0].name: c[2] for c in columns}


@pytest.mark.parametrize("version", VERSIONS)
def test_opt_in_encodings(tmp_path, version):
    table, expected = opt_in_table(5000, version)
    write(tmp_path / REL, table, version)
    r = check_reads(tmp_path, table)
    kinds = layouts(tmp_path / REL)
    for plan in structural_plans_for_schema(r.lance_schema()):
        leaves = [plan] if plan.column >= 0 else [c for c in plan.children]
        used = set().union(*(kinds[leaf.column] for leaf in leaves if leaf.column >= 0))
        assert expected[plan.field.name] in used, (plan.field.name, used)


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_pages(tmp_path, version):
    values = [None if i % 5 == 0 else bytes([i % 256]) * (i * 37) for i in range(60)]
    schema = pa.schema([_field("blob", pa.large_binary(), blob="true")])
    table = pa.table({"blob": pa.array(values, pa.large_binary())}, schema=schema)
    write(tmp_path / REL, table, version)
    assert "blob_layout" in layouts(tmp_path / REL)[0]
    r = reader(tmp_path)
    as_bytes = r.read_range([ColumnPlan(pa.field("blob", pa.large_binary()), 0)], 0, 60)[0]
    assert as_bytes.equals(table.column(0).combine_chunks())
    assert r.take([ColumnPlan(pa.field("blob", pa.binary()), 0)], [7, 1, 5])[0].to_pylist() == [values[7], values[1], None]
    description = pa.struct([("position", pa.uint64()), ("size", pa.uint64())])
    described = r.read_range([ColumnPlan(pa.field("blob", description), 0)], 0, 60)[0]
    assert described.null_count == 12
    sizes = described.field("size").to_pylist()
    assert sizes[1:5] == [37, 74, 111, 148] and sizes[0] is None


# -- targeted decoding -----------------------------------------------------------------------------


def test_take_decodes_only_the_chunks_it_needs(tmp_path, monkeypatch):
    n = 200_000
    table = pa.table({
        "i": pa.array(np.arange(n, dtype=np.int64) * 7919 % 1000003),
        "l": pa.array([[i] * (i % 3) for i in range(n)], pa.list_(pa.int32())),
    })
    write(tmp_path / REL, table, "2.2", batch_rows=n)
    decoded: list[tuple[int, int]] = []
    original = miniblock.MiniBlockPage._decode_raw

    def spy(self, chunks, *args, **kwargs):
        decoded.append((len(chunks), len(self.chunk_counts)))
        return original(self, chunks, *args, **kwargs)

    monkeypatch.setattr(miniblock.MiniBlockPage, "_decode_raw", spy)
    r = reader(tmp_path)
    plans = structural_plans_for_schema(r.lance_schema())
    rows = [150_001, 3, 77_777]
    got = r.take(plans, rows)
    assert got[0].to_pylist() == table.column("i").take(rows).to_pylist()
    assert got[1].to_pylist() == table.column("l").take(rows).to_pylist()
    # a few chunks (a row may end in the next chunk) out of pages of many chunks
    assert sum(count for count, _ in decoded) <= 6
    assert min(total for _, total in decoded) > 20


def test_reads_without_memory_mapping(tmp_path, monkeypatch):
    """Object stores are read with ranged reads instead of a memory map."""
    from lance_format.file import reader as reader_module

    table = extras(1500)
    write(tmp_path / REL, table, "2.2")
    monkeypatch.setattr(reader_module, "_open", lambda store, path: (store.open_input(path), None))
    r = check_reads(tmp_path, table)
    assert r._mapped is None
