"""Arguments users get wrong: each raises a typed error naming what is wrong, or works like pylance.

The cases are the ones an outside review measured: inputs Python would silently coerce
(``take([1.5])`` as row 1, ``version=1.5`` as version 1, nested index lists flattened), inputs that
crashed with a bare Python error, and long filters built from ID lists.
"""

from __future__ import annotations

import os
from datetime import timedelta

import lance
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import lance_format
from lance_format.errors import InvalidInputError, LanceError, TagError
from tests.compat import assert_tables_equal


@pytest.fixture
def uri(tmp_path) -> str:
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(range(10), pa.int64()), "s": list("abcdefghij")}), path)
    return path


@pytest.mark.parametrize(
    "indices, message",
    [
        ([2**64], "out of range"),
        ([2**63], "out of range"),
        (["a"], "must be integers, got str"),
        (None, "got NoneType"),
        ([1.5], "must be integers, got float 1.5"),
        ([[0, 1]], "flat sequence"),
        (3, "got int"),
        ("01", "got str"),
        (pa.array([0.0, 1.0]), "Arrow type double"),
        (pa.array([0, None], pa.int64()), "must not be null"),
    ],
)
def test_take_refuses_what_is_not_a_list_of_integers(uri, indices, message):
    ds = lance_format.dataset(uri)
    with pytest.raises(InvalidInputError, match=message) as info:
        ds.take(indices)
    assert uri in str(info.value)


def test_take_accepts_the_integer_containers_pylance_accepts(uri):
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    for indices in ([3, 0, 9], np.array([3, 0, 9], dtype=np.uint32), pa.array([3, 0, 9], pa.int64()), (3, 0, 9), []):
        assert ours.take(indices).to_pylist() == theirs.take(list(np.asarray(indices, dtype=np.int64))).to_pylist()


@pytest.mark.parametrize("version", [1.5, 1.0, True, -1, [1]])
def test_version_must_be_an_integer_or_a_tag(uri, version):
    with pytest.raises(InvalidInputError, match="version must"):
        lance_format.dataset(uri, version=version)


def test_version_as_numpy_integer_and_digit_string(uri):
    lance_format.write_dataset(pa.table({"id": [10], "s": ["k"]}), uri, mode="append")
    assert lance_format.dataset(uri, version=np.int64(1)).count_rows() == 10
    assert lance_format.dataset(uri, version="2").count_rows() == 11


def test_tag_names_longer_than_a_file_name_are_refused(uri):
    ds = lance_format.dataset(uri)
    with pytest.raises(TagError, match="longer than"):
        ds.tags.create("x" * 5000, 1)
    ds.tags.create("x" * 212, 1)  # the longest whose staging file name fits in 255 bytes
    assert lance.dataset(uri).tags.list()["x" * 212]["version"] == 1


@pytest.mark.parametrize("bad", ["/tmp/a\0b.lance", "/tmp/" + "a" * 100_000, "/tmp/" + "/".join(["d"] * 3000)])
def test_uris_no_store_can_hold_are_refused_before_io(bad):
    with pytest.raises(InvalidInputError, match="NUL|too long"):
        lance_format.dataset(bad)
    with pytest.raises(InvalidInputError, match="NUL|too long"):
        lance_format.write_dataset(pa.table({"id": [1]}), bad)


def test_projection_with_a_repeated_or_non_string_column(uri):
    ds = lance_format.dataset(uri)
    with pytest.raises(InvalidInputError, match=r"duplicate column names in the projection: \['id'\]"):
        ds.to_table(columns=["id", "id"])
    with pytest.raises(InvalidInputError, match="must be strings"):
        ds.to_table(columns=[0])


@pytest.mark.parametrize("older_than", [5, 5.0, "1d"])
def test_cleanup_age_must_be_a_timedelta(uri, older_than):
    ds = lance_format.dataset(uri)
    before = sorted(os.listdir(os.path.join(uri, "_versions")))
    with pytest.raises(InvalidInputError, match="older_than must be a datetime.timedelta"):
        ds.cleanup_old_versions(older_than=older_than)
    assert sorted(os.listdir(os.path.join(uri, "_versions"))) == before
    ds.cleanup_old_versions(older_than=timedelta(days=1))


@pytest.mark.parametrize("data", ["hello", b"bytes", None, 42, [1, 2, 3], iter(["a"])])
def test_write_refuses_data_that_is_not_tabular(tmp_path, data):
    target = tmp_path / "w.lance"
    with pytest.raises(InvalidInputError, match="cannot write|RecordBatches|cannot convert") as info:
        lance_format.write_dataset(data, str(target))
    assert isinstance(info.value, LanceError)
    assert not target.exists() or not os.listdir(target / "_versions")


def test_write_accepts_every_tabular_input_pylance_accepts(tmp_path, uri):
    rows = [{"id": 100, "s": "x"}, {"id": 101, "s": None}]
    inputs = {
        "list of dicts": rows,
        "dict of columns": {"id": [100, 101], "s": ["x", None]},
        # (pandas 3 DataFrames carry large_string, which pylance too refuses to append to string)
        "pandas, typed": pd.DataFrame(rows).astype({"s": "object"}),
        "pyarrow dataset": pads.dataset(pa.Table.from_pylist(rows)),
        "table iterable": [pa.Table.from_pylist(rows)],
        "lance dataset (ours)": lance_format.write_dataset(rows, str(tmp_path / "src.lance")),
        "lance dataset (pylance)": lance.write_dataset(rows, str(tmp_path / "src2.lance")),
    }
    expected = len(lance_format.dataset(uri).to_table())
    for name, data in inputs.items():
        ds = lance_format.write_dataset(data, uri, mode="append")
        expected += 2
        assert ds.count_rows() == expected, name
        assert ds.to_table().slice(expected - 2).to_pylist() == rows, name
    assert_tables_equal(lance_format.dataset(uri).to_table(), lance.dataset(uri).to_table(), "appended inputs")


def test_list_of_dicts_that_do_not_fit_the_schema(uri):
    with pytest.raises(LanceError):
        lance_format.write_dataset([{"id": "not a number", "s": "x"}], uri, mode="append")
    assert lance_format.dataset(uri).version == 1


def test_dotted_top_level_names_are_refused_like_pylance(tmp_path, uri):
    target = str(tmp_path / "dotted.lance")
    with pytest.raises(InvalidInputError, match="cannot contain '.'"):
        lance_format.write_dataset(pa.table({"a.b": [1]}), target)
    with pytest.raises(OSError, match="cannot contain"):
        lance.write_dataset(pa.table({"a.b": [1]}), target)
    ds = lance_format.dataset(uri)
    with pytest.raises(InvalidInputError, match="cannot contain '.'"):
        ds.add_columns({"a.b": "id + 1"})
    with pytest.raises(InvalidInputError, match="cannot contain '.'"):
        ds.alter_columns({"path": "id", "name": "x.y"})
    assert lance_format.dataset(uri).version == 1
    # a dot inside a struct's field name is a plain name, as in pylance
    nested = pa.table({"st": pa.array([{"a.b": 1}])})
    lance_format.write_dataset(nested, target)
    assert lance.dataset(target).to_table().equals(nested)


@pytest.mark.parametrize("terms", [500, 5000])
def test_long_or_chains_from_id_lists(tmp_path, terms):
    target = str(tmp_path / "ids.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(range(20_000), pa.int64())}), target)
    ids = list(range(0, 20_000, 7))[:terms]
    flt = " OR ".join(f"id = {i}" for i in ids)
    ours = lance_format.dataset(target).to_table(filter=flt)
    assert ours.column("id").to_pylist() == ids
    assert_tables_equal(ours, lance.dataset(target).to_table(filter=flt), "OR chain")


def test_long_and_chains_and_mixed_nesting(tmp_path):
    target = str(tmp_path / "ids.lance")
    lance_format.write_dataset(pa.table({"id": pa.array(range(3000), pa.int64()), "g": [i % 3 for i in range(3000)]}),
                               target)
    filters = [
        " AND ".join(f"id != {i}" for i in range(2500)),
        "(" + " OR ".join(f"(id = {i} AND g = {i % 3})" for i in range(2000)) + ") AND id > 10",
        "NOT (" + " OR ".join(f"id = {i}" for i in range(2000)) + ")",
        " OR ".join(f"(id = {i} OR id = {i + 1})" for i in range(0, 2000, 2)),
    ]
    for flt in filters:
        assert_tables_equal(lance_format.dataset(target).to_table(filter=flt),
                            lance.dataset(target).to_table(filter=flt), flt[:40])
