"""pylance's scan options (``columns`` as SQL expressions, ``order_by``, ``strict_batch_size``,
``include_deleted_rows``, ``_rowoffset``, execution hints, ``explain_plan``/``analyze_plan``),
call for call against pylance on tables either engine wrote."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest
from lance.dataset import ColumnOrdering as TheirOrdering

import lance_format
from lance_format.dataset import ColumnOrdering
from lance_format.errors import InvalidInputError, UnsupportedFeatureError

ENGINES = {"ours": lance_format, "pylance": lance}


@pytest.fixture(params=["ours", "pylance"])
def table(request, tmp_path) -> str:
    engine = ENGINES[request.param]
    path = str(tmp_path / "events.lance")
    n = 30
    engine.write_dataset(pa.table({
        "id": pa.array(range(n), pa.int64()),
        "url": [f"https://example.com/p/{i % 7}?q={i}" for i in range(n)],
        "score": [None if i % 4 == 0 else float((i * 37) % 11) for i in range(n)],
        "cat": [["a", "b", "c"][i % 3] for i in range(n)],
    }), path, max_rows_per_file=8)
    engine.dataset(path).delete("id % 5 = 3")
    return path


def both(table, **kwargs):
    return lance_format.dataset(table).to_table(**kwargs), lance.dataset(table).to_table(**kwargs)


@pytest.mark.parametrize("columns", [
    {"id2": "id * 2", "host": "lower(url)", "id": "id"},
    {"flag": "score > 5", "c": "cat"},
    {"rid": "_rowid", "x": "id + 1"},
])
def test_columns_as_sql_expressions(table, columns):
    ours, theirs = both(table, columns=columns)
    assert ours.equals(theirs)
    ours, theirs = both(table, columns=columns, filter="cat = 'b'", limit=3, offset=1)
    assert ours.equals(theirs)


def test_columns_expression_errors(table):
    with pytest.raises(InvalidInputError):
        lance_format.dataset(table).to_table(columns={"bad": "no_such_column + 1"})


@pytest.mark.parametrize("order_by", [
    ["id"],
    [ColumnOrdering("score", ascending=False, nulls_first=True)],
    [ColumnOrdering("score")],
    [ColumnOrdering("cat", ascending=False), ColumnOrdering("score", nulls_first=True)],
])
def test_order_by(table, order_by):
    theirs_order = [TheirOrdering(o.column_name, o.ascending, o.nulls_first) if isinstance(o, ColumnOrdering) else o
                    for o in order_by]
    columns = ["id", "cat", "score"]  # pylance needs its sort keys in the projection
    keys = [o.column_name if isinstance(o, ColumnOrdering) else o for o in order_by]
    for extra in ({}, {"limit": 4, "offset": 2}, {"filter": "id > 4"}):
        ours = lance_format.dataset(table).to_table(columns=columns, order_by=order_by, **extra)
        theirs = lance.dataset(table).to_table(columns=columns, order_by=theirs_order, **extra)
        # the sort keys come out in the same order; ties may come in any order (pylance's sort is not stable)
        assert ours.select(keys).to_pydict() == theirs.select(keys).to_pydict()
        if not extra.get("limit"):
            assert sorted(ours.to_pylist(), key=str) == sorted(theirs.to_pylist(), key=str)


def test_order_by_a_column_outside_the_projection_and_errors(table):
    ours = lance_format.dataset(table).to_table(columns=["url"], order_by=[ColumnOrdering("id", ascending=False)])
    expected = lance.dataset(table).to_table(columns=["id", "url"]).sort_by([("id", "descending")])
    assert ours.column("url").to_pylist() == expected.column("url").to_pylist()
    with pytest.raises(InvalidInputError):
        lance_format.dataset(table).to_table(order_by=["missing"])
    with pytest.raises(InvalidInputError):
        lance_format.dataset(table).to_table(order_by=[42])


def test_strict_batch_size(table):
    ours = [b.num_rows for b in lance_format.dataset(table).to_batches(batch_size=7, strict_batch_size=True)]
    theirs = [b.num_rows for b in lance.dataset(table).to_batches(batch_size=7, strict_batch_size=True)]
    assert ours == theirs == [7, 7, 7, 3]
    loose = [b.num_rows for b in lance_format.dataset(table).to_batches(batch_size=7)]
    assert max(loose) <= 7 and sum(loose) == 24


def test_include_deleted_rows_and_row_offsets(table):
    kwargs = dict(columns=["id", "_rowaddr", "_rowoffset"], with_row_id=True, include_deleted_rows=True)
    ours, theirs = both(table, **kwargs)
    assert ours.to_pydict() == theirs.to_pydict()
    assert ours.num_rows == 30 and ours.column("_rowid").null_count == 6
    ours, theirs = both(table, columns=["id", "_rowoffset"], filter="cat = 'a'")
    assert ours.to_pydict() == theirs.to_pydict()
    assert lance_format.dataset(table).scanner(with_row_id=True, include_deleted_rows=True).count_rows() == 30
    with pytest.raises(InvalidInputError, match="with_row_id"):
        lance_format.dataset(table).to_table(include_deleted_rows=True)


def test_execution_hints_do_not_change_results(table):
    hints = dict(batch_size_bytes=1024, batch_readahead=2, fragment_readahead=1, scan_in_order=False,
                 late_materialization=["url"], use_stats=False, io_buffer_size=1 << 20, prefilter=True,
                 use_scalar_index=False, fast_search=False, blob_handling="blobs_descriptions")
    ours, theirs = both(table, filter="score > 3", **hints)
    assert ours.equals(theirs)
    # positional arguments in pylance's order
    ds = lance_format.dataset(table)
    assert ds.to_table(["id"], "id < 5", 2, 1, None, 10).equals(lance.dataset(table).to_table(["id"], "id < 5", 2, 1, None, 10))


@pytest.mark.parametrize("option", [{"blob_handling": "some_binary"}])
def test_search_options_are_refused(table, option):
    with pytest.raises(UnsupportedFeatureError):
        lance_format.dataset(table).to_table(**option)


def test_unknown_option_is_refused(table):
    with pytest.raises(InvalidInputError, match="unknown scan option"):
        lance_format.dataset(table).scanner(no_such_option=1)


def test_explain_and_analyze_plan(table):
    scanner = lance_format.dataset(table).scanner(columns={"double": "id * 2"}, filter="cat = 'a'",
                                                  order_by=["id"], limit=3)
    plan = scanner.explain_plan()
    for part in ("Projection: ['double']", "Limit: offset=0, limit=3", "Sort: id ASC NULLS LAST",
                 "Filter:", "LanceRead:", "num_fragments=4", "projection=[id, cat]"):
        assert part in plan, (part, plan)
    assert "fragment_ids=[0, 1, 2, 3]" in scanner.explain_plan(verbose=True)
    analyzed = scanner.analyze_plan()
    assert analyzed.startswith(plan.split("LanceRead:")[0])
    assert "output_rows=3" in analyzed and "rows_after_filter=8" in analyzed
    assert "output_rows=8" in lance_format.dataset(table).scanner(filter="cat = 'a'").analyze_plan(count_rows=True)
    assert scanner.to_table().num_rows == 3  # analyzing leaves the scanner usable


def test_dataset_asof_like_pylance(tmp_path):
    import time
    from datetime import datetime, timedelta

    path = str(tmp_path / "asof.lance")
    stamps = []
    for i in range(3):
        lance_format.write_dataset(pa.table({"x": [i]}), path, mode="append" if i else "create")
        time.sleep(0.05)
        stamps.append(datetime.now())
    for stamp in stamps:
        assert lance_format.dataset(path, asof=stamp).version == lance.dataset(path, asof=stamp).version
    assert lance_format.dataset(path, asof=stamps[0]).version == 1
    text = (stamps[-1] + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert lance_format.dataset(path, asof=text).version == lance.dataset(path, asof=text).version == 3
    assert lance_format.dataset(path, 2, asof=stamps[-1]).version == 2  # a version wins over asof
    with pytest.raises(ValueError):
        lance.dataset(path, asof=stamps[0] - timedelta(days=1))
    with pytest.raises(lance_format.VersionNotFoundError):
        lance_format.dataset(path, asof=stamps[0] - timedelta(days=1))
    with pytest.raises(InvalidInputError):
        lance_format.dataset(path, asof="yesterday-ish")


def test_dataset_default_scan_options_like_pylance(table):
    options = {"with_row_id": True, "batch_size": 5}
    ours = lance_format.dataset(table, default_scan_options=options)
    theirs = lance.dataset(table, default_scan_options=options)
    assert ours.schema == theirs.schema and ours.schema.names[-1] == "_rowid"
    assert ours.to_table().equals(theirs.to_table())
    assert max(b.num_rows for b in ours.to_batches()) <= 5 < ours.count_rows()
    assert ours.to_table(batch_size=100, columns=["id"]).equals(theirs.to_table(batch_size=100, columns=["id"]))
    assert ours.checkout_version(1).to_table().schema.names[-1] == "_rowid"


def test_dataset_cache_options_accepted_and_unsupported_refused(table):
    ds = lance_format.dataset(table, block_size=4096, index_cache_size=16, metadata_cache_size_bytes=1 << 20,
                              index_cache_size_bytes=1 << 20, read_params={"validate_on_decode": True})
    assert ds.count_rows() == lance.dataset(table).count_rows()
    for kwargs in ({"commit_lock": object()}, {"session": object()}, {"read_params": {"nope": 1}}):
        with pytest.raises(InvalidInputError):
            lance_format.dataset(table, **kwargs)
