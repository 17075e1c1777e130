"""DataFusion's ``arrow_cast(expr, 'Type')`` in Lance's SQL, expression for expression against pylance.

Projections and ``add_columns`` must give the same Arrow types and values in both engines; type
names pylance refuses we refuse too.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.dataset.sql.arrow_types import ArrowTypeNameError, parse_arrow_type_name
from lance_format.errors import InvalidInputError

TABLE = pa.table({"id": pa.array([1, 2, None], pa.int64()), "f": [1.5, 2.5, None], "s": ["3", "4", None]})

PROJECTIONS = [
    "arrow_cast(id, 'Int32')", "arrow_cast(id, 'Int8')", "arrow_cast(id, 'UInt64')", "arrow_cast(id, 'Float32')",
    "arrow_cast(id, 'Float16')", "arrow_cast(f, 'Int64')", "arrow_cast(s, 'Int64')", "arrow_cast(id, 'Utf8')",
    "arrow_cast(id, 'LargeUtf8')", "arrow_cast(id, 'Timestamp(Nanosecond, None)')",
    "arrow_cast(id, 'Timestamp(Microsecond, Some(\"UTC\"))')", "arrow_cast(id, 'Date32')",
    "arrow_cast(id, 'Duration(Second)')", "arrow_cast(f, 'Float64')",
]

ADDED = [
    "arrow_cast(NULL, 'FixedSizeList(4, Float32)')", "arrow_cast(NULL, 'FixedSizeList(4 x Float32)')",
    "arrow_cast(NULL, 'Int64')", "arrow_cast(NULL, 'Utf8')", "arrow_cast(NULL, 'Float32')",
    "arrow_cast(NULL, 'List(Int64)')", "arrow_cast(2, 'Float32')", "arrow_cast(id, 'Int16')",
]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("arrow_cast")
    lance.write_dataset(TABLE, root / "theirs")
    lance_format.write_dataset(TABLE, root / "ours")
    return str(root / "theirs"), str(root / "ours")


@pytest.mark.parametrize("expression", PROJECTIONS)
def test_projection_matches_pylance(paths: tuple[str, str], expression: str) -> None:
    theirs, ours = paths
    expected = lance.dataset(theirs).to_table(columns={"x": expression})
    got = lance_format.dataset(ours).to_table(columns={"x": expression})
    assert got.schema.field("x").type == expected.schema.field("x").type
    assert got.column("x").to_pylist() == expected.column("x").to_pylist()


@pytest.mark.parametrize("expression", ADDED)
def test_add_columns_matches_pylance(tmp_path: Path, expression: str) -> None:
    theirs = lance.write_dataset(TABLE, tmp_path / "theirs")
    ours = lance_format.write_dataset(TABLE, tmp_path / "ours")
    theirs.add_columns({"v": expression})
    ours.add_columns({"v": expression})
    expected = lance.dataset(str(tmp_path / "theirs")).to_table()
    assert lance_format.dataset(str(tmp_path / "ours")).to_table() == expected
    # each engine reads the other's files
    assert lance.dataset(str(tmp_path / "ours")).to_table() == expected
    assert lance_format.dataset(str(tmp_path / "theirs")).to_table() == expected


def test_unknown_type_name_is_refused_like_pylance(paths: tuple[str, str]) -> None:
    theirs, ours = paths
    with pytest.raises(ValueError, match="Unsupported type 'int64'"):
        lance.dataset(theirs).to_table(columns={"x": "arrow_cast(id, 'int64')"})
    with pytest.raises(InvalidInputError, match="Unsupported type 'int64'"):
        lance_format.dataset(ours).to_table(columns={"x": "arrow_cast(id, 'int64')"})


@pytest.mark.parametrize(("text", "expected"), [
    ("FixedSizeList(32, Float32)", pa.list_(pa.float32(), 32)),
    ("FixedSizeList(32 x Float32)", pa.list_(pa.float32(), 32)),
    ("List(nullable Int64)", pa.list_(pa.int64())),
    ("LargeList(Utf8)", pa.large_list(pa.string())),
    ("Dictionary(Int32, Utf8)", pa.dictionary(pa.int32(), pa.string())),
    ("Decimal128(10, 2)", pa.decimal128(10, 2)),
    ("Timestamp(ns)", pa.timestamp("ns")),
    ("Time64(Nanosecond)", pa.time64("ns")),
    ("FixedSizeBinary(16)", pa.binary(16)),
])
def test_type_names(text: str, expected: pa.DataType) -> None:
    assert parse_arrow_type_name(text) == expected


@pytest.mark.parametrize("text", ["int64", "Int64)", "FixedSizeList(x, Float32)", "Struct(a Int64)", ""])
def test_bad_type_names(text: str) -> None:
    with pytest.raises(ArrowTypeNameError):
        parse_arrow_type_name(text)
