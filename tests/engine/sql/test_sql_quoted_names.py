"""``LanceDataset.sql`` reads double-quoted names as columns (DataFusion's identifiers, as pylance's
``sql`` does) while double quotes inside string literals stay text: JSON paths compare against
'"Alice"' (a JSON string). Each query's rows are compared with pylance's."""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError

PROFILES = [{"user": {"name": "Alice", "email": "alice@example.com"}}, {"user": {"name": "Bob"}}, None,
            {"user": {"name": "Al \"the\" Pal"}}]
TABLE = pa.table({"id": [1, 2, 3, 4], "Country Code": ["US", "DE", None, "US"],
                  "data": pa.array([json.dumps(p) if p else None for p in PROFILES], pa.json_())})

QUERIES = [
    "SELECT id FROM dataset WHERE json_extract(data, '$.user.name') = '\"Alice\"'",
    "SELECT \"id\", \"Country Code\" FROM dataset WHERE \"Country Code\" = 'US'",
    "SELECT id FROM dataset WHERE \"Country Code\" IS NULL OR json_extract(data, '$.user.name') = '\"Bob\"'",
    "SELECT id, \"Country Code\" AS cc FROM dataset WHERE id > 1 ORDER BY \"Country Code\" DESC",
]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("sql")
    return {"pylance": lance.write_dataset(TABLE, str(root / "p")),
            "ours": lance_format.write_dataset(TABLE, str(root / "o"))}


@pytest.mark.parametrize("query", QUERIES)
def test_sql_like_pylance(tables, query):
    def rows(ds):
        return pa.Table.from_batches(ds.sql(query).build().to_batch_records()).to_pylist()

    assert rows(tables["ours"]) == rows(tables["pylance"])


def test_filter_with_the_same_path_like_pylance(tables):
    where = "json_extract(data, '$.user.name') = '\"Alice\"'"
    assert tables["ours"].to_table(filter=where).equals(tables["pylance"].to_table(filter=where))
    assert tables["ours"].count_rows(where) == 1


def test_unknown_double_quoted_name(tables):
    with pytest.raises(InvalidInputError):
        tables["ours"].sql("SELECT \"nope\" FROM dataset").build().to_batch_records()
