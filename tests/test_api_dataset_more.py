"""More of pylance's LanceDataset and scanner behaviour, call for call: error messages users
match, plan text, batch shapes, commit messages and locks, appends of a subset of columns.

Each test runs the same calls against pylance (the oracle) and lance_format and compares what
they return.
"""

from __future__ import annotations

import re

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

ENGINES = {"ours": lance_format, "pylance": lance}


@pytest.fixture(params=["ours", "pylance"])
def engine(request):
    return ENGINES[request.param]


def _both(tmp_path, table: pa.Table, **write_options):
    """The same table written by each engine: {name: dataset}."""
    return {name: mod.write_dataset(table, str(tmp_path / name), **write_options) for name, mod in ENGINES.items()}


@pytest.mark.parametrize("kwargs, message", [
    ({"offset": -1, "limit": 10}, "Offset must be non-negative"),
    ({"offset": 10, "limit": -1}, "Limit must be non-negative"),
    ({"offset": -1, "limit": -1}, "Limit must be non-negative"),
])
def test_negative_limit_offset_messages(tmp_path, kwargs, message):
    for ds in _both(tmp_path, pa.table({"a": range(20)})).values():
        with pytest.raises(ValueError, match=message):
            ds.to_table(**kwargs)


def test_plan_names_the_read_columns_and_metrics(tmp_path):
    for ds in _both(tmp_path, pa.table({"a": range(100), "b": range(100)})).values():
        scanner = ds.scanner(columns=[], filter="a < 50", with_row_id=True)
        assert "projection=[a]" in scanner.explain_plan(True)
        assert "row_id=true" in scanner.explain_plan()
        plan = ds.scanner(columns=[], filter="a < 50", with_row_id=True).analyze_plan()
        assert re.search(r"^\s*LanceRead:.*output_rows=50.*rows_scanned=100.*$", plan, re.MULTILINE), plan
        plan = ds.scanner().analyze_plan()
        read = re.search(r"^\s*LanceRead:.*bytes_read=(\S+).*iops=(\d+).*requests=(\d+).*$", plan, re.MULTILINE)
        assert read and int(read.group(2)) > 0, plan
        assert "projection=[a, b]" in ds.scanner().explain_plan()


def test_scan_without_columns_counts_rows(tmp_path):
    for ds in _both(tmp_path, pa.table({"a": range(100)})).values():
        batches = list(ds.scanner(columns=[], batch_size=10).to_batches())
        assert [(b.num_rows, b.schema.names) for b in batches] == [(10, [])] * 10
        ids = ds.scanner(columns=[], with_row_id=True).to_table()
        assert ids.schema == pa.schema([pa.field("_rowid", pa.uint64())]) and ids.num_rows == 100
        ds.delete("a = 5")
        assert sum(b.num_rows for b in ds.scanner(columns=[], with_row_id=True).to_batches()) == 99
        assert sum(b.num_rows for b in ds.scanner(columns=[], batch_size=10).to_batches()) == 99


@pytest.mark.parametrize("late", [True, ["values"], False, None])
def test_filtered_batch_shapes_follow_late_materialization(tmp_path, late):
    table = pa.table({"filter": np.arange(1000), "values": np.arange(1000)})
    shapes = {}
    for name, ds in _both(tmp_path, table, max_rows_per_file=300).items():
        shapes[name] = [[b.num_rows for b in ds.to_batches(columns=columns, filter="filter % 2 == 0", batch_size=32,
                                                             late_materialization=late, limit=limit)]
                        for columns in (["values"], ["values", "filter"]) for limit in (None, 100)]
    assert shapes["ours"] == shapes["pylance"]


def test_default_batch_size_from_environment(tmp_path, monkeypatch):
    datasets = _both(tmp_path, pa.table({"a": np.arange(1000), "b": np.arange(1000)}), max_rows_per_file=400)
    monkeypatch.setenv("LANCE_DEFAULT_BATCH_SIZE", "12")
    shapes = {name: [b.num_rows for b in ds.to_batches()] for name, ds in datasets.items()}
    assert shapes["ours"] == shapes["pylance"] and set(shapes["ours"]) == {12, 4, 8}
    assert [b.num_rows for b in datasets["ours"].to_batches(batch_size=16)] == \
        [b.num_rows for b in datasets["pylance"].to_batches(batch_size=16)]
