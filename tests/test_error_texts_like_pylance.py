"""Error texts callers match on (official Lance's own tests do), worded as pylance words them;
each case runs on pylance and on this engine with the same regular expression."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_format

SCHEMA = pa.schema([pa.field("email", pa.string(), nullable=False), pa.field("visits", pa.int64())])
ROWS = pa.table({"email": ["a@example.com", "b@example.org", "c@example.net"], "visits": [3, None, 1]}, schema=SCHEMA)


@pytest.fixture(params=["pylance", "ours"])
def engine(request):
    return lance if request.param == "pylance" else lance_format


def test_delta_needs_both_versions(engine, tmp_path):
    ds = engine.write_dataset(ROWS, str(tmp_path / "t"))
    for partial in ({"begin_version": 1}, {"end_version": 2}):
        with pytest.raises(ValueError, match="Invalid user input: Must specify both with_begin_version and "
                                             "with_end_version"):
            ds.delta(**partial)
    with pytest.raises(ValueError, match="Invalid user input: Must specify either compared_against_version"):
        ds.delta()


def test_delete_rows_out_of_range(engine, tmp_path):
    ds = engine.write_dataset(ROWS, str(tmp_path / "t"))
    for offset in (3, 1000):
        with pytest.raises(ValueError, match=f"offset {offset} is out of range for fragment 0 with 3 rows"):
            ds.get_fragments()[0].delete_rows([0, offset])
    assert engine.dataset(str(tmp_path / "t")).count_rows() == 3


def test_nulls_in_a_non_nullable_field(engine, tmp_path):
    engine.write_dataset(ROWS, str(tmp_path / "t"))
    nulls = pa.table({"email": pa.array(["d@example.com", None]), "visits": pa.array([1, 2])})
    with pytest.raises(OSError, match="The field `email` contained null values even though the field is marked "
                                      "non-null in the schema"):
        engine.write_dataset(nulls, str(tmp_path / "t"), mode="append")
    assert engine.dataset(str(tmp_path / "t")).count_rows() == 3
