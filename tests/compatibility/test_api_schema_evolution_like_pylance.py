"""add_columns / merge_columns / alter_columns as pylance does them, call for call.

Each test makes the same calls on pylance (the oracle) and lance_format and compares the tables,
the data files written, and the errors: their builtin type and the words pylance users match on.
"""

from __future__ import annotations

import uuid

import lance
import pandas as pd
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, NewColumnDataError

ENGINES = {"ours": lance_format, "pylance": lance}


def _files_per_fragment(ds) -> list[int]:
    return [len(f.data_files()) for f in ds.get_fragments()]


@pytest.mark.parametrize("exprs", [
    {"b": "CAST(NULL AS INT)"},
    {"b": "CAST(NULL AS BIGINT)", "c": "CAST(NULL AS DATE)"},
    {"b": "CAST(NULL AS STRING)", "c": "a + 1"},
    {"b": "NULL"},
    {"b": "0"},
    {"b": "'x'", "c": "1.5", "d": "true"},
    {"b": "CAST(1 AS TINYINT)"},
])
def test_sql_columns_like_pylance(tmp_path, exprs):
    """Constant and all-null SQL columns: same values and types; only CAST(NULL AS t) columns are
    added without writing data files."""
    seen = {}
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": range(100)}), str(tmp_path / name), max_rows_per_file=50,
                                  data_storage_version="stable")
        before = [f.data_files() for f in ds.get_fragments()]
        ds.add_columns(exprs)
        seen[name] = (ds.to_table(), ds.schema, _files_per_fragment(ds))
        if all(e.startswith("CAST(NULL") for e in exprs.values()):
            assert [f.data_files() for f in ds.get_fragments()] == before
    assert seen["ours"][0].equals(seen["pylance"][0])
    assert seen["ours"][1] == seen["pylance"][1]
    assert seen["ours"][2] == seen["pylance"][2]


def test_many_constant_columns(tmp_path):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"0": [1, 2, 3]}), str(tmp_path / name))
        ds.add_columns({str(i): "0" for i in range(1, 300)})
    ours, theirs = (lance.dataset(str(tmp_path / n)).to_table() for n in ENGINES)
    assert ours.num_rows == 3 and ours.equals(theirs)


def test_stream_row_count_errors(tmp_path):
    """A stream of new column values with too few or too many rows: OSError with pylance's words."""
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": range(100)}), str(tmp_path / name), max_rows_per_file=25)
        schema = pa.schema([pa.field("f", pa.int64())])
        for rows, words in [(50, "Stream ended before producing values for all rows in dataset"),
                            (101, "Stream produced more values than expected for dataset")]:
            batches = iter([pa.record_batch([pa.array(range(rows))], ["f"])])
            with pytest.raises(OSError, match=words) as info:
                ds.add_columns(batches, reader_schema=schema)
            if name == "ours":
                assert isinstance(info.value, NewColumnDataError)
        assert ds.version == 1
        # data in other chunks than the fragments' still lines up row for row
        ds.add_columns(iter([pa.record_batch([pa.array(range(i, i + 20))], ["g"]) for i in range(0, 100, 20)]),
                       reader_schema=pa.schema([pa.field("g", pa.int64())]))
    assert lance.dataset(str(tmp_path / "ours")).to_table().equals(lance.dataset(str(tmp_path / "pylance")).to_table())


def test_udf_output_schema_checks(tmp_path):
    """The first output (or the declared schema) fixes the schema; any other output is refused,
    with no cast (OSError from add_columns, ValueError from a fragment's merge_columns)."""
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": range(100)}), str(tmp_path / name), max_rows_per_file=25)

        @engine.batch_udf()
        def fresh_name(batch):
            return pa.record_batch([batch["a"]], [str(uuid.uuid4())])

        with pytest.raises(OSError, match="Output schema of function does not match the expected schema"):
            ds.add_columns(fresh_name)
        inferred = fresh_name.output_schema  # the sample's schema is kept, as in pylance
        assert inferred is not None and len(inferred) == 1
        with pytest.raises(ValueError, match="Output schema of function does not match the expected schema") as info:
            ds.get_fragments()[0].merge_columns(fresh_name)
        assert inferred.names[0] in str(info.value)

        @engine.batch_udf(output_schema=pa.schema([pa.field("x", pa.int32())]))
        def wider(batch):
            return pa.record_batch([batch["a"]], ["x"])

        with pytest.raises(OSError, match="Expected:\nx: int32\nGot:\nx: int64"):
            ds.add_columns(wider)
        assert wider(pa.record_batch([pa.array([1])], ["a"])).num_rows == 1  # calling it runs the function as is

        @engine.batch_udf()
        def from_pandas(batch):
            return pd.DataFrame({"t": [3 * x for x in batch["a"].to_pylist()]})

        ds.add_columns(from_pandas, read_columns=["a"])
        assert ds.version == 2
    ours, theirs = (lance.dataset(str(tmp_path / n)).to_table() for n in ENGINES)
    assert ours.equals(theirs)


def test_fragment_merge_columns_refuses_a_checkpoint(tmp_path):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": range(40)}), str(tmp_path / name), max_rows_per_file=20)

        @engine.batch_udf(checkpoint_file=str(tmp_path / f"{name}.sqlite"))
        def same(batch):
            return batch

        with pytest.raises(ValueError, match="A checkpoint file cannot be used"):
            ds.get_fragments()[0].merge_columns(same, columns=["a"])


@pytest.mark.parametrize("alteration, words", [
    ({"path": "x", "data_type": pa.int8()}, "Can't cast value 1024 to type Int8"),
    ({"path": "x", "data_type": pa.uint8()}, "Can't cast value 1024 to type UInt8"),
    ({"path": "n", "data_type": pa.uint32()}, "Can't cast value -1 to type UInt32"),
    ({"path": "x", "data_type": pa.string()}, 'Cannot cast column "x" from Int32 to Utf8'),
    ({"path": "f", "data_type": pa.int32()}, 'Cannot cast column "f" from Float64 to Int32'),
    ({"path": "s", "data_type": pa.int64()}, 'Cannot cast column "s" from Utf8 to Int64'),
    ({"path": "q", "name": "z"}, 'Column "q" does not exist'),
])
def test_alter_columns_errors(tmp_path, alteration, words):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"x": pa.array([1, 2, 1024], pa.int32()), "f": [1.5, 2.0, 3.0],
                                            "s": ["1", "x", None], "n": [-1, 2, 3]}), str(tmp_path / name))
        with pytest.raises(Exception, match=words):
            ds.alter_columns(alteration)
        assert ds.version == 1


@pytest.mark.parametrize("alteration, words", [
    ({"path": "x", "type": "string"}, "Unknown key: type. Valid keys are name, nullable, and data_type."),
    ({"path": "x"}, "At least one of name, nullable, or data_type must be specified"),
])
def test_alter_columns_argument_errors(tmp_path, alteration, words):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"x": [1]}), str(tmp_path / name))
        with pytest.raises(ValueError, match=words):
            ds.alter_columns(alteration)


@pytest.mark.parametrize("predicate, words", [
    ("s BETWEEN 10 AND 20", "Invalid user input: "),
    ("s > 10", "Invalid user input: "),
    ("s AN", "Invalid user input: "),
    ("\U0001f95e", "Invalid user input: "),
    ("i = 1 AND", "Invalid user input: "),
    ("foo = 7", "No field named foo"),
    ("i", "does not return a boolean"),
])
def test_rejected_filters(tmp_path, predicate, words):
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"i": range(5), "s": list("abcde")}), str(tmp_path / name))
        with pytest.raises(ValueError, match=words) as info:
            ds.to_table(filter=predicate)
        if name == "ours":
            assert isinstance(info.value, InvalidInputError)


@pytest.mark.parametrize("predicate", [
    "d <= current_date()", "d <= current_date", "d < today()", "d > current_date()",
    "ts <= current_timestamp()", "ts < now()", "ts > now()",
])
def test_current_date_and_time(tmp_path, predicate):
    import datetime

    table = pa.table({"d": pa.array([datetime.date(2020, 1, 1), datetime.date(2999, 1, 2)], pa.date32()),
                      "ts": pa.array([datetime.datetime(2020, 1, 1), datetime.datetime(2999, 1, 1)],
                                     pa.timestamp("us"))})
    results = {}
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(table, str(tmp_path / name))
        results[name] = ds.to_table(filter=predicate)
    assert results["ours"].num_rows == 1
    assert results["ours"].equals(results["pylance"])
