"""JSON columns (``arrow.json``) stored as pylance stores them: JSONB in ``lance.json`` fields.

Checked against pylance 14: the stored bytes of every document are identical, reads give the same
text, tables written by either engine read back in both, appends mix engines, JSON inside structs
and lists works, and pylance's JSON filter functions give pylance's results.
"""

from __future__ import annotations

import glob
import time

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.schema.jsonb import decode_array, decode_text, encode_array, encode_text

JSON = pa.json_(pa.string())

DOCUMENTS = [
    "null", "true", "false", "0", "-0", "1", "-1", "127", "128", "255", "256", "-128", "-129", "32767", "-32768",
    "-32769", "65535", "65536", "2147483647", "-2147483648", "-2147483649", "4294967295", "4294967296",
    "9223372036854775807", "-9223372036854775808", "18446744073709551615", "18446744073709551616",
    "-9223372036854775809", "123456789012345678901234567890", "1.5", "-1.5", "-0.0", "0.1", "1.0", "2.50",
    "1e2", "1E400", "-1e400", "1e300", "5e-324", "1.7976931348623157e308", "1e15", "1e16", "1.5e16", "9.999e15",
    "1e21", "1e-4", "1e-5", "1.2345e-5", "1e-6", "1.2345e-6", "-2.5e-8", "123.456", "12345678901234567890.5",
    '""', '"abc"', '"h\\u00e9\\u2603 \\ud83d\\ude00"', '"a\\nb\\"c\\\\d/e\\u0001\\t\\b\\f\\r\\u007f"', '"hé☃"',
    "[]", "{}", "[[],{}]", '{"":1}', '[1,"a",null,true,false,[2,[3]],{"x":-1.25}]', '{"b":1,"a":2}',
    '{"a":{"x":[1,2]},"aa":null}', '{"B":1,"a":2,"_":3,"é":4,"ab":5,"b":6}', '  [ 1 , 2 ]  ',
    '{"user":{"name":"Ann","tags":["x","y"],"age":30,"score":9.5,"active":true,"meta":{}}}',
    "NaN", "Infinity", "-Infinity", "[NaN,1]", '"\\ud83d"', '"a\x01b"', "", "  ",
    "[" + ",".join(str(i) for i in range(300)) + "]", '{"k":"' + "x" * 70000 + '"}',
]


def _table(docs: list[str | None]) -> pa.Table:
    return pa.table({"id": pa.array(range(len(docs)), pa.int64()), "j": pa.array(docs, pa.string()).cast(JSON)})


def _raw_jsonb(path) -> list[bytes | None]:
    """Column ``j``'s stored JSONB, read by pylance's own file reader (no JSON decoding)."""
    values: list[bytes | None] = []
    for data_file in sorted(glob.glob(f"{path}/data/*.lance")):
        values += LanceFileReader(data_file).read_all().to_table()["j"].to_pylist()
    return values


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The documents written by pylance and by this engine."""
    root = tmp_path_factory.mktemp("json")
    table = _table(DOCUMENTS + [None])
    lance.write_dataset(table, str(root / "pylance"))
    lance_format.write_dataset(table, str(root / "ours"))
    return root


def test_encoder_and_decoder_match_pylance_for_every_document(written):
    theirs = _raw_jsonb(written / "pylance")
    texts = lance.dataset(str(written / "pylance")).to_table()["j"].to_pylist()
    for doc, stored, text in zip(DOCUMENTS, theirs, texts):
        assert encode_text(doc) == stored, doc
        assert decode_text(stored) == text, doc


def test_tables_written_by_each_engine_are_identical(written):
    assert _raw_jsonb(written / "ours") == _raw_jsonb(written / "pylance")
    expected = lance.dataset(str(written / "pylance")).to_table()
    for path in ("pylance", "ours"):
        for engine in (lance, lance_format):
            table = engine.dataset(str(written / path)).to_table()
            assert table.schema.field("j").type == JSON
            assert table["j"].to_pylist() == expected["j"].to_pylist()


def test_field_is_stored_like_pylance(written):
    ours, theirs = (lance_format.dataset(str(written / p)).lance_schema.fields[1].proto for p in ("ours", "pylance"))
    assert ours.logical_type == theirs.logical_type == "json"
    assert ours.extension_name == theirs.extension_name == "lance.json"
    assert dict(ours.metadata) == dict(theirs.metadata)
    assert ours.encoding == theirs.encoding


def test_appends_across_engines(tmp_path):
    path = str(tmp_path / "t")
    lance.write_dataset(_table(['{"a":1}', None]), path)
    lance_format.write_dataset(_table(['[1,2.5]', '"x"']), path, mode="append")
    lance.write_dataset(_table(['{"b":{"c":[]}}']), path, mode="append")
    expected = ['{"a":1}', None, "[1,2.5]", '"x"', '{"b":{"c":[]}}']
    for engine in (lance, lance_format):
        assert engine.dataset(path).to_table()["j"].to_pylist() == expected


def test_json_in_structs_and_lists(tmp_path):
    inner = pa.StructArray.from_arrays([pa.array(['{"z":1,"y":[true]}', None], pa.string()).cast(JSON),
                                        pa.array([1, 2])], fields=[pa.field("k", JSON), pa.field("n", pa.int64())])
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2]), pa.array(["1", "{}"], pa.string()).cast(JSON),
                                     mask=pa.array([False, True]))
    table = pa.table({"s": inner, "l": lists})
    results = []
    for writer in (lance, lance_format):
        path = str(tmp_path / writer.__name__)
        writer.write_dataset(table, path)
        results += [reader.dataset(path).to_table() for reader in (lance, lance_format)]
    assert all(r.equals(results[0]) for r in results)
    assert results[0].to_pylist()[0] == {"s": {"k": '{"y":[true],"z":1}', "n": 1}, "l": ["1", "{}"]}


@pytest.mark.parametrize("bad", ['{"a":1,"a":2}', "{", "{\"a\"}", "1 2", "-NaN"])
def test_invalid_documents_are_refused_before_anything_is_written(tmp_path, bad):
    with pytest.raises(OSError):
        lance.write_dataset(_table([bad]), str(tmp_path / "oracle"))
    with pytest.raises(InvalidInputError, match="JSON"):
        lance_format.write_dataset(_table([bad]), str(tmp_path / "ours"))
    assert not (tmp_path / "ours" / "_versions").exists()


def test_throughput_of_the_per_document_codec():
    docs = ['{"user":{"name":"Ann","tags":["x","y"],"age":' + str(i) + ',"score":9.5,"active":true}}' for i in range(20000)]
    start = time.perf_counter()
    encoded = encode_array(pa.array(docs))
    middle = time.perf_counter()
    decoded = decode_array(encoded)
    end = time.perf_counter()
    assert decoded.storage.to_pylist()[5] == '{"user":{"active":true,"age":5,"name":"Ann","score":9.5,"tags":["x","y"]}}'
    # documents per second, printed for the report (pytest -s); a floor catches pathological slowdowns
    print(f"JSONB encode {len(docs) / (middle - start):,.0f} docs/s, decode {len(docs) / (end - middle):,.0f} docs/s")
    assert len(docs) / (end - start) > 2000


# ------------------------------------------------------------------------------------ JSON functions
FUNCTION_DOCS = [
    '{"name":"Ann","age":30,"score":9.5,"active":true,"tags":["x","y"],"addr":{"city":"Oslo","zip":[1,2]},'
    '"s_int":"12","s_float":"1.25","s_bool":"yes","n":null,"f":1.5,"neg":-2.5,"big":1e20,"mixed":[1,"x",true,1.0,null]}',
    '{"name":"Bob","age":"41","score":7,"active":"false","tags":[],"addr":{"city":"Rome"},"f":2.5,"neg":-1.4}',
    '[10,20,[30]]', '"plain"', "5", "null", None, '{"tags":"notalist","age":null,"name":null}',
]

EXPRESSIONS = [
    "json_extract(j, '$.name')", "json_extract(j, 'name')", "json_extract(j, '$.addr.zip[1]')",
    "json_extract(j, '$.addr')", "json_extract(j, '$')", "json_extract(j, '$[1]')", "json_extract(j, '$[2][0]')",
    "json_extract(j, '$.tags[*]')", "json_extract(j, '$.addr.*')", "json_extract(j, '$[*]')",
    "json_extract(j, '$.mixed[last]')", "json_extract(j, '$[\"age\"]')", "json_extract(j, '$.missing')",
    "json_extract(j, '$.n')", "json_get(j, 'addr')", "json_get(j, 'name')", "json_get(j, '1')", "json_get(j, 'n')",
    "json_get_string(json_get(j, 'addr'), 'city')", "json_get_int(json_get(j, '2'), '0')",
    "json_get_int(j, 'age')", "json_get_int(j, 'f')", "json_get_int(j, 'neg')", "json_get_int(j, 's_int')",
    "json_get_int(j, 'n')", "json_get_int(j, '0')",
    "json_get_float(j, 'score')", "json_get_float(j, 'age')", "json_get_float(j, 's_float')",
    "json_get_float(j, 'big')", "json_get_bool(j, 'active')", "json_get_bool(j, 's_bool')",
    "json_get_string(j, 'name')", "json_get_string(j, 'age')", "json_get_string(j, 'score')",
    "json_get_string(j, 'big')", "json_get_string(j, 'active')",
    "json_exists(j, '$.name')", "json_exists(j, '$.n')", "json_exists(j, '$.addr.zip[1]')", "json_exists(j, '$')",
    "json_exists(j, '$[1]')", "json_exists(j, 'tags')",
    "json_array_contains(j, '$.tags', 'x')", "json_array_contains(j, '$.tags', 'z')",
    "json_array_contains(j, '$.mixed', 1)", "json_array_contains(j, '$.mixed', true)",
    "json_array_contains(j, '$.mixed', 'null')", "json_array_contains(j, '$.mixed', NULL)",
    "json_array_contains(j, '$', 10)", "json_array_contains(j, '$.missing', 1)",
    "json_array_contains(j, '$.tags', 1.0)",
    "json_array_length(j, '$.tags')", "json_array_length(j, 'tags')", "json_array_length(j, '$')",
    "json_array_length(j, '$.name')", "json_array_length(j, '$.missing')", "json_array_length(j, '$.n')",
]

FILTERS = [
    "json_get_string(j, 'name') = 'Ann'",
    "json_extract(j, '$.name') = '\"Bob\"'", "json_exists(j, '$.tags')", "NOT json_exists(j, '$.tags')",
    "json_array_contains(j, '$.tags', 'y')", "json_array_length(j, '$.tags') >= 1",
    "json_get_float(j, 'score') > 8", "json_get_string(json_get(j, 'addr'), 'city') LIKE 'R%'",
    "json_extract(j, '$.addr.city') IS NOT NULL AND json_get_int(j, 'f') = 2",
]


@pytest.fixture(scope="module")
def function_tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("jsonfn")
    table = _table(FUNCTION_DOCS)
    lance.write_dataset(table, str(root / "pylance"))
    lance_format.write_dataset(table, str(root / "ours"))
    return lance.dataset(str(root / "pylance")), lance_format.dataset(str(root / "ours")), root


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_json_function_values_match_pylance(function_tables, expression):
    oracle, ours, root = function_tables
    expected = oracle.to_table(columns={"v": expression})
    for table in (ours, lance_format.dataset(str(root / "pylance"))):  # our table and pylance's, read by us
        got = table.to_table(columns={"v": expression})
        assert got.schema.field("v").type == expected.schema.field("v").type
        assert got["v"].to_pylist() == expected["v"].to_pylist()


@pytest.mark.parametrize("sql", FILTERS)
def test_json_filters_match_pylance(function_tables, sql):
    oracle, ours, _ = function_tables
    expected = oracle.to_table(filter=sql)
    got = ours.to_table(filter=sql)
    assert got["id"].to_pylist() == expected["id"].to_pylist()
    assert got["j"].to_pylist() == expected["j"].to_pylist()


@pytest.mark.parametrize("expression", ["json_get_int(j, 'name')", "json_get_float(j, 'name')",
                                        "json_get_bool(j, 'age')", "json_get_string(j, 'addr')"])
def test_json_conversions_that_fail_in_pylance_fail_here(function_tables, expression):
    oracle, ours, _ = function_tables
    with pytest.raises(ValueError):
        oracle.to_table(columns={"v": expression})
    with pytest.raises(InvalidInputError, match="Failed to convert"):
        ours.to_table(columns={"v": expression})


def test_json_functions_need_a_json_column(function_tables):
    _, ours, _ = function_tables
    with pytest.raises(InvalidInputError, match="JSON"):
        ours.to_table(filter="json_get(CAST(id AS VARCHAR), 'a') IS NULL")


def test_delete_and_update_with_json_predicates_match_pylance(tmp_path):
    table = _table(FUNCTION_DOCS)
    results = []
    for engine in (lance, lance_format):
        path = str(tmp_path / engine.__name__)
        ds = engine.write_dataset(table, path)
        ds.delete("json_array_length(j, '$.tags') = 0")
        ds.update({"id": "id + 100"}, where="json_get_string(j, 'name') = 'Ann'")
        results.append(engine.dataset(path).to_table().sort_by("id").to_pylist())
    assert results[0] == results[1]


def test_update_merge_insert_and_add_columns_keep_json_like_pylance(tmp_path):
    table = _table(['{"a":1}', "[2]", None])
    source = pa.table({"id": pa.array([1, 4], pa.int64()),
                       "j": pa.array(['{"b":true}', "3.5"], pa.string()).cast(JSON)})
    results = []
    for engine in (lance, lance_format):
        path = str(tmp_path / engine.__name__)
        engine.write_dataset(table, path).update({"id": "id + 10"}, where="id = 0")
        engine.dataset(path).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            source)
        engine.dataset(path).add_columns({"k": "json_extract(j, '$.a')"})
        results += [reader.dataset(path).to_table().sort_by("id").to_pylist() for reader in (lance, lance_format)]
    assert all(r == results[0] for r in results)
    assert results[0][0] == {"id": 1, "j": '{"b":true}', "k": None}


def test_appends_refuse_plain_binary_into_json_and_json_into_binary(tmp_path):
    path = str(tmp_path / "t")
    table = _table(['{"a":1}']).append_column("b", pa.array([b"1"], pa.large_binary()))
    lance_format.write_dataset(table, path)
    raw = pa.table({"id": [2], "j": pa.array([b"xx"], pa.large_binary()), "b": pa.array([b"2"], pa.large_binary())})
    as_json = pa.table({"id": [3], "j": pa.array(["[1]"], pa.string()).cast(JSON),
                        "b": pa.array(["2"], pa.string()).cast(JSON)})
    for data in (raw, as_json):
        with pytest.raises(OSError):  # pylance: "should have type json" / "should have type large_binary"
            lance.write_dataset(data, path, mode="append")
        with pytest.raises(lance_format.errors.SchemaMismatchError, match="JSON"):
            lance_format.write_dataset(data, path, mode="append")
    assert lance_format.dataset(path).to_table()["j"].to_pylist() == ['{"a":1}']
