"""Arrow map columns, stored the way pylance 14 stores them (file version 2.2 only).

A map is a list layer over its non-null ``entries`` struct (key, value): Lance schema
``map`` -> ``entries`` (struct, not null) -> ``key`` (not null), ``value``. Both directions are
checked against pylance (ours written -> pylance reads, pylance written -> we read), with nulls at
every level, empty maps, maps nested in structs, lists and maps, several pages, filters and
projections, mutations, and the refusals (file versions 2.0/2.1, ``keys_sorted``).
"""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.file import LanceFileReader as PyReader

import lance_format
from lance_format.errors import UnsupportedFeatureError
from lance_format.file.plans import structural_plans_for_schema
from lance_format.file.reader import LanceFileReader
from lance_format.file.writer import LanceFileWriter
from lance_format.io.object_store import ObjectStore
from lance_format.proto import encodings_v2_1_pb2 as pb
from lance_format.schema import LanceSchema, arrow_type_of
from tests.compat import SYSTEM, assert_same_history, assert_same_version, assert_tables_equal
from tests.engine.file.test_file_v2_1_write import describe, layouts

ENGINES = {"pylance": lance, "ours": lance_format}
STR_INT = pa.map_(pa.string(), pa.int64())


# -- data -------------------------------------------------------------------------------------------


def _offsets(rng: np.random.Generator, n: int, max_len: int, null_every: int) -> pa.Array:
    """Map/list offsets of ``n`` rows (0..max_len entries), null at every ``null_every``-th row."""
    lengths = rng.integers(0, max_len + 1, n)
    null = np.zeros(n, np.bool_)
    null[3::null_every] = True
    lengths[null & (np.arange(n) % 2 == 0)] = 0  # some null maps own no entries, others keep garbage
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.array(offsets, mask=np.append(null, False))


def _with_nulls(array: pa.Array, every: int, start: int = 1) -> pa.Array:
    mask = np.zeros(len(array), np.bool_)
    mask[start::every] = True
    return pc.if_else(pa.array(mask), pa.nulls(len(array), array.type), array)


def map_table(n: int, seed: int = 0, first_id: int = 0) -> pa.Table:
    """Map columns with null maps, empty maps, null values, and maps nested every way pylance allows."""
    rng = np.random.default_rng(seed)

    def string_int(rows: int, null_every: int) -> pa.MapArray:
        offsets = _offsets(rng, rows, 4, null_every)
        items = int(offsets[-1].as_py())
        keys = pa.array(np.char.add("k", (rng.integers(0, 40, items)).astype(str)))
        values = _with_nulls(pa.array(rng.integers(-1000, 1000, items), pa.int64()), 5)
        return pa.MapArray.from_arrays(offsets, keys, values)

    ids = pa.array(np.arange(first_id, first_id + n), pa.int64())
    m = string_int(n, 7)

    # struct<a: int32, m: map> with null structs
    struct_m = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 9, n), pa.int32()), string_int(n, 5)], names=["a", "m"],
        mask=pa.array(np.arange(n) % 11 == 4),
    )
    # list<map> with null lists, empty lists and null maps inside
    list_offsets = _offsets(rng, n, 3, 9)
    list_m = pa.ListArray.from_arrays(list_offsets, string_int(int(list_offsets[-1].as_py()), 6))
    # map<int32, struct<p: float64, q: string>> with null struct values
    off = _offsets(rng, n, 3, 8)
    items = int(off[-1].as_py())
    struct_values = pa.StructArray.from_arrays(
        [pa.array(rng.random(items)), pa.array(np.char.add("q", rng.integers(0, 5, items).astype(str)))],
        names=["p", "q"], mask=pa.array(np.arange(items) % 4 == 2),
    )
    int_struct = pa.MapArray.from_arrays(off, pa.array(rng.integers(0, 100, items), pa.int32()), struct_values)
    # map<string, list<int64>> and map<string, map<string, int64>>
    off = _offsets(rng, n, 2, 9)
    items = int(off[-1].as_py())
    value_lists = pa.ListArray.from_arrays(_offsets(rng, items, 3, 4),
                                           pa.array(rng.integers(0, 9, 3 * items), pa.int64()))
    list_values = pa.MapArray.from_arrays(off, pa.array(np.char.add("l", np.arange(items).astype(str))), value_lists)
    off = _offsets(rng, n, 2, 10)
    items = int(off[-1].as_py())
    map_values = pa.MapArray.from_arrays(off, pa.array(np.char.add("o", np.arange(items).astype(str))),
                                         string_int(items, 4))
    return pa.table({
        "id": ids,
        "tag": pa.array(np.char.add("t", (np.arange(first_id, first_id + n) % 13).astype(str))),
        "m": m,
        "s": struct_m,
        "lm": list_m,
        "ms": int_struct,
        "ml": list_values,
        "mm": map_values,
    })


def assert_identical(got: pa.Table, want: pa.Table, context: str = "") -> None:
    """Equal rows and *exactly* equal types (Arrow's map equality ignores child names; we do not)."""
    assert [str(f.type) for f in got.schema] == [str(f.type) for f in want.schema], context
    assert [f.nullable for f in got.schema] == [f.nullable for f in want.schema], context
    assert_tables_equal(got, want, context)


def field_rows(schema: LanceSchema) -> list[tuple]:
    return [(f.name, f.id, f.parent_id, f.logical_type, f.nullable, f.encoding) for f in schema.walk()]


# -- schema -----------------------------------------------------------------------------------------


def test_schema_fields_and_ids_match_pylance(tmp_path):
    table = map_table(40)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lance_format.write_dataset(table, ours)
    lance.write_dataset(table, theirs)
    ours_fields = field_rows(lance_format.dataset(ours).lance_schema)
    assert ours_fields == field_rows(lance_format.dataset(theirs).lance_schema)
    assert ours_fields[2:6] == [("m", 2, -1, "map", True, 1), ("entries", 3, 2, "struct", False, 0),
                                ("key", 4, 3, "string", False, 2), ("value", 5, 3, "int64", True, 1)]
    assert str(lance.dataset(ours).schema) == str(lance.dataset(theirs).schema) == str(table.schema)
    assert lance_format.dataset(theirs).schema.equals(lance.dataset(theirs).schema, check_metadata=True)


def test_renamed_map_children_keep_lance_names_but_read_as_key_value(tmp_path):
    # pylance keeps the Arrow child names in the Lance schema and reads them back as key/value
    map_type = pa.map_(pa.field("k", pa.string(), False), pa.field("v", pa.int32(), False))
    schema = pa.schema([pa.field("m", map_type, False, metadata={"a": "b"})])
    table = pa.table({"m": pa.array([[("x", 1)], [], [("y", 2), ("z", 3)]], map_type)}, schema=schema)
    for name, engine in ENGINES.items():
        engine.write_dataset(table, str(tmp_path / name))
    ours_fields = field_rows(lance_format.dataset(str(tmp_path / "ours")).lance_schema)
    assert ours_fields == field_rows(lance_format.dataset(str(tmp_path / "pylance")).lance_schema)
    assert [f[0] for f in ours_fields] == ["m", "entries", "k", "v"]
    for name in ENGINES:
        back = lance.dataset(str(tmp_path / name)).to_table()
        mine = lance_format.dataset(str(tmp_path / name)).to_table()
        assert str(mine.schema) == str(back.schema)
        assert back.schema.field("m").type.item_field == pa.field("value", pa.int32(), False)
        assert mine.column("m").to_pylist() == back.column("m").to_pylist() == table.column("m").to_pylist()


def test_keys_sorted_maps_are_refused(tmp_path):
    sorted_map = pa.map_(pa.string(), pa.int64(), keys_sorted=True)
    table = pa.table({"m": pa.array([[("a", 1)]], sorted_map)})
    with pytest.raises(UnsupportedFeatureError, match="keys_sorted") as err:
        lance_format.write_dataset(table, str(tmp_path / "t"))
    assert err.value.column == "m"
    with pytest.raises(OSError, match="keys_sorted"):  # pylance refuses them too
        lance.write_dataset(table, str(tmp_path / "p"))
    assert not os.path.exists(tmp_path / "t" / "_versions")


def test_malformed_map_field_is_refused():
    with pytest.raises(UnsupportedFeatureError, match="entries"):
        arrow_type_of("map", [pa.field("entries", pa.int32())])
    with pytest.raises(UnsupportedFeatureError, match="entries"):
        arrow_type_of("map", [])


# -- both directions --------------------------------------------------------------------------------


@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
def test_ours_written_pylance_reads_identically(tmp_path, stable):
    uri = str(tmp_path / "t")
    table = map_table(500, seed=1)
    lance_format.write_dataset(table, uri, max_rows_per_file=200, enable_stable_row_ids=stable)
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "2.2"
    assert_identical(theirs.to_table(), table, "pylance reading ours")
    rows = [0, 3, 4, 199, 200, 201, 350, 499, 7]
    assert_identical(theirs.take(rows), table.take(rows), "pylance take")
    batches = pa.Table.from_batches(list(theirs.to_batches(batch_size=37)))
    assert_identical(batches, table, "pylance batches")
    assert_same_version(uri, 1)


def test_pylance_written_we_read_identically(tmp_path):
    uri = str(tmp_path / "t")
    table = map_table(500, seed=2)
    lance.write_dataset(table, uri, max_rows_per_file=200)
    ours = lance_format.dataset(uri)
    assert_identical(ours.to_table(), table, "reading pylance's")
    rows = [499, 0, 3, 200, 3, 201, 7]
    assert_identical(ours.take(rows), table.take(rows), "take")
    assert_identical(ours.to_table(columns=["mm", "id"]), table.select(["mm", "id"]), "projection")
    assert_identical(pa.Table.from_batches(list(ours.to_batches(batch_size=41))), table, "batches")
    assert_same_version(uri, 1)


def test_null_empty_and_garbage_maps_round_trip(tmp_path):
    # garbage entries under null maps, sliced input, all-null and all-empty columns
    entries = pa.StructArray.from_arrays([pa.array(list("abcdefg")), pa.array([1, None, 3, 4, None, 6, 7])],
                                         fields=list(STR_INT.field(0).type))
    validity = pa.array([True, False, True, True, False]).buffers()[1]
    offsets = pa.py_buffer(np.array([0, 2, 4, 4, 5, 7], np.int32))
    garbage = pa.Array.from_buffers(STR_INT, 5, [validity, offsets], children=[entries])
    assert garbage.to_pylist() == [[("a", 1), ("b", None)], None, [], [("e", None)], None]
    table = pa.table({
        "id": pa.array(range(4), pa.int64()),
        "g": garbage.slice(1),
        "all_null": pa.nulls(4, STR_INT),
        "all_empty": pa.array([[]] * 4, STR_INT),
        "null_values": pa.array([[("a", None)], [("b", None), ("c", None)], None, []], STR_INT),
    })
    expected = pa.table({name: pa.array(col.to_pylist(), col.type) for name, col in zip(table.column_names,
                                                                                         table.columns)})
    for name, engine in ENGINES.items():
        uri = str(tmp_path / name)
        engine.write_dataset(table, uri)
        assert_identical(lance.dataset(uri).to_table(), expected, f"pylance reading {name}'s")
        assert_identical(lance_format.dataset(uri).to_table(), expected, f"reading {name}'s")
        assert lance_format.dataset(uri).take([3, 0, 1]).column("g").to_pylist() == [None, None, []]


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_many_pages_and_chunks(tmp_path, writer):
    uri = str(tmp_path / "t")
    table = map_table(200_000, seed=3).select(["id", "tag", "m", "s"])
    ENGINES[writer].write_dataset(table, uri)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    assert len(theirs.get_fragments()) == 1
    if writer == "pylance":  # pylance cuts its map columns into several pages; ours holds many chunks
        data = os.path.join(uri, "data")
        (name,) = os.listdir(data)
        assert max(len(pages) for pages in layouts(os.path.join(data, name), data).values()) > 1
    rows = [0, 1, 65_535, 65_536, 99_999, 150_001, 199_999]
    for name, ds in (("pylance", theirs), ("ours", ours)):
        assert_identical(ds.to_table(), table, f"{name} reading {writer}'s")
        assert_identical(ds.take(rows), table.take(rows), f"{name} take")
    count = 0
    for batch in ours.to_batches(batch_size=30_000, columns=["m"]):
        assert batch.column(0).equals(table.column("m").slice(count, batch.num_rows).combine_chunks())
        count += batch.num_rows
    assert count == table.num_rows


def test_file_with_many_small_pages_reads_in_pylance(tmp_path):
    table = map_table(3000, seed=4)
    store = ObjectStore(tmp_path)
    schema = LanceSchema.from_arrow(table.schema)
    writer = LanceFileWriter(store, "f.lance", schema, version="2.2", max_page_bytes=2048)
    for batch in table.to_batches(max_chunksize=700):
        writer.write_batch(batch)
    writer.finish()
    pages = layouts(str(tmp_path / "f.lance"), tmp_path)
    assert min(len(p) for p in pages.values()) > 3
    assert_identical(PyReader(str(tmp_path / "f.lance")).read_all().to_table(), table, "pylance file reader")
    with LanceFileReader(store, "f.lance") as reader:
        plans = structural_plans_for_schema(reader.lance_schema())
        arrays = reader.read_range(plans, 0, reader.num_rows)
        assert_identical(pa.Table.from_arrays(arrays, schema=table.schema), table, "our file reader")
        rows = np.array([2999, 5, 1500, 5, 0])
        taken = reader.take(plans, rows)
        assert_identical(pa.Table.from_arrays(taken, schema=table.schema), table.take(rows), "our take")


# -- encoding ---------------------------------------------------------------------------------------


def test_map_is_encoded_as_a_list_of_its_entries_struct(tmp_path):
    """Same pages as list<struct<key, value>>, and the layers pylance writes for the map."""
    m = pa.array([[("a", 1), ("b", None)], None, [], [("c", 3)], [("d", 4), ("e", 5), ("f", 6)]], STR_INT)
    as_list = m.view(pa.list_(m.type.field(0)))
    paths = {}
    for name, column in (("map", m), ("list", as_list)):
        paths[name] = str(tmp_path / name)
        lance_format.write_dataset(pa.table({"c": column}), paths[name])
    lance.write_dataset(pa.table({"c": m}), str(tmp_path / "pylance"))

    def pages(uri: str) -> list:
        data = os.path.join(uri, "data")
        (name,) = os.listdir(data)
        return [[(page.SerializeToString(), describe(page), list(page.mini_block_layout.layers)) for page in col]
                for col in layouts(os.path.join(data, name), data).values()]

    ours, as_lists, theirs = pages(paths["map"]), pages(paths["list"]), pages(str(tmp_path / "pylance"))
    assert ours == as_lists
    assert len(ours) == len(theirs) == 2  # key and value leaf columns, no column for map or entries
    for mine, pylance_pages in zip(ours, theirs):
        assert [(d, layers) for _, d, layers in mine] == [(d, layers) for _, d, layers in pylance_pages]
    # innermost first: value/key item, entries struct (all valid), map (null and empty)
    assert ours[0][0][2] == [pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_NULL_AND_EMPTY_LIST]
    assert ours[1][0][2] == [pb.REPDEF_NULLABLE_ITEM, pb.REPDEF_ALL_VALID_ITEM, pb.REPDEF_NULL_AND_EMPTY_LIST]


# -- scans and mutations ----------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_filter_on_another_column_with_maps_projected(tmp_path, writer):
    uri = str(tmp_path / "t")
    table = map_table(1000, seed=5)
    ENGINES[writer].write_dataset(table, uri, max_rows_per_file=300)
    columns = ["m", "id", "mm", "lm"]
    for predicate in ("id % 7 = 3", "tag = 't4' AND id > 500", "id < 0"):
        want = lance.dataset(uri).to_table(columns=columns, filter=predicate)
        got = lance_format.dataset(uri).to_table(columns=columns, filter=predicate)
        assert_identical(got, want, predicate)
    got = lance_format.dataset(uri).to_table(columns=["m"], filter="tag = 't1'", with_row_id=True)
    assert got.column_names == ["m", "_rowid"]
    assert got.column("m").to_pylist() == table.filter(pc.equal(table.column("tag"), "t1")).column("m").to_pylist()
    assert lance_format.dataset(uri).count_rows("m IS NULL") == lance.dataset(uri).count_rows("m IS NULL") > 0


STEPS = [
    lambda ds: ds.delete("id % 5 = 1"),
    lambda ds: ds.update({"tag": "'updated'"}, where="id BETWEEN 3 AND 40"),
    lambda ds: ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    .execute(map_table(30, seed=9, first_id=50)),
    lambda ds: ds.delete("m IS NULL"),
    lambda ds: ds.optimize.compact_files(target_rows_per_fragment=40),
    lambda ds: ds.drop_columns(["lm"]),
]


@pytest.mark.parametrize("stable", [False, True], ids=["addr-ids", "stable-ids"])
@pytest.mark.parametrize("first", ["pylance", "ours"])
def test_mutations_on_a_table_with_map_columns(tmp_path, first, stable):
    uri = str(tmp_path / "t")
    order = ["pylance", "ours"] if first == "pylance" else ["ours", "pylance"]
    ENGINES[order[0]].write_dataset(map_table(60, seed=6), uri, enable_stable_row_ids=stable, max_rows_per_file=25)
    for i, step in enumerate(STEPS):
        step(ENGINES[order[(i + 1) % 2]].dataset(uri))
    assert_same_history(uri)
    final = lance.dataset(uri).to_table(columns=["id", "m", "mm"] + SYSTEM).sort_by("id")
    assert final.num_rows and final.column("m").null_count == 0
    assert 55 in final.column("id").to_pylist()  # inserted by merge_insert, maps and all


def test_our_mutations_match_pylance_on_map_tables(tmp_path):
    for name, engine in ENGINES.items():
        uri = str(tmp_path / name)
        engine.write_dataset(map_table(60, seed=7), uri, max_rows_per_file=25)
        for step in STEPS:
            step(engine.dataset(uri))
    ours, theirs = lance_format.dataset(str(tmp_path / "ours")), lance.dataset(str(tmp_path / "pylance"))
    assert ours.version == theirs.version
    assert_identical(ours.to_table().sort_by("id"), theirs.to_table().sort_by("id"), "final tables")
    assert_identical(lance.dataset(str(tmp_path / "ours")).to_table().sort_by("id"),
                     theirs.to_table().sort_by("id"), "pylance reading our history")


# -- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, pylance_says", [("2.0", "no field encoding"), ("2.1", "not enabled")])
def test_maps_are_refused_in_file_versions_2_0_and_2_1(tmp_path, version, pylance_says):
    table = map_table(10)
    with pytest.raises(OSError, match=pylance_says):
        lance.write_dataset(table, str(tmp_path / "pylance"), data_storage_version=version)
    uri = str(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match=f"map column 'm' .* file version {version}") as err:
        lance_format.write_dataset(table, uri, data_storage_version=version)
    assert (err.value.table, err.value.column) == (uri, "m")
    assert not os.path.exists(os.path.join(uri, "_versions"))
    assert not os.listdir(os.path.join(uri, "data")) if os.path.exists(os.path.join(uri, "data")) else True


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_maps_are_refused_on_tables_of_older_file_versions(tmp_path, version):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), uri, data_storage_version=version)
    nested = pa.table({"id": pa.array([1, 2], pa.int64()),
                       "s": pa.array([{"m": [("a", 1)]}, None], pa.struct([("m", STR_INT)]))})
    for data, column in ((map_table(5).select(["id", "m"]), "m"), (nested, "s.m")):
        with pytest.raises(UnsupportedFeatureError, match=f"file version {version}") as err:
            lance_format.write_dataset(data, uri, mode="overwrite")  # keeps the table's file version
        assert (err.value.table, err.value.column) == (uri, column)
    assert lance.dataset(uri).version == 1
    assert len(os.listdir(os.path.join(uri, "data"))) == 1
    # like pylance: an all-null map column can be added (no data is written), but not filled
    lance_format.dataset(uri).add_columns(pa.field("m", STR_INT))
    assert lance.dataset(uri).to_table().to_pylist() == [{"id": 1, "m": None}]
    rows = pa.table({"id": pa.array([2], pa.int64()), "m": pa.array([[("a", 1)]], STR_INT)})
    with pytest.raises(UnsupportedFeatureError, match=f"map column 'm' .* file version {version}") as err:
        lance_format.write_dataset(rows, uri, mode="append")
    assert (err.value.table, err.value.column) == (uri, "m")
    assert lance.dataset(uri).version == 2
    assert len(os.listdir(os.path.join(uri, "data"))) == 1
