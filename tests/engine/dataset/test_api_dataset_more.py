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


def test_commit_messages_are_transaction_properties(tmp_path, engine):
    from lance.dataset import LANCE_COMMIT_MESSAGE_KEY as PYLANCE_KEY

    from lance_format.dataset import LANCE_COMMIT_MESSAGE_KEY

    assert LANCE_COMMIT_MESSAGE_KEY == PYLANCE_KEY
    path = str(tmp_path / "t")
    ds = engine.write_dataset(pa.table({"a": [1]}), path, commit_message="first",
                              transaction_properties={"p": "v"})
    engine.write_dataset(pa.table({"a": [2]}), path, mode="append")
    frags = engine.fragment.write_fragments(pa.table({"a": [5]}), path)
    ds = engine.LanceDataset.commit(path, engine.LanceOperation.Append(frags), read_version=2,
                                    commit_message="by commit")
    props = [t.transaction_properties for t in ds.get_transactions()]
    assert props == [{LANCE_COMMIT_MESSAGE_KEY: "by commit"}, {}, {LANCE_COMMIT_MESSAGE_KEY: "first", "p": "v"}]
    # and each engine reads the other's
    other = lance if engine is lance_format else lance_format
    assert [t.transaction_properties for t in other.dataset(path).get_transactions()] == props


def _recording_lock(calls):
    import contextlib

    @contextlib.contextmanager
    def lock(version):
        calls.append(("enter", version))
        yield
        calls.append(("exit", version))
    return lock


def test_commit_lock_wraps_each_commit(tmp_path, engine):
    calls: list = []
    lock = _recording_lock(calls)
    path = str(tmp_path / "t")
    engine.write_dataset(pa.table({"a": range(10)}), path, commit_lock=lock)
    engine.write_dataset(pa.table({"a": range(10)}), path, mode="append", commit_lock=lock)
    ds = engine.dataset(path, commit_lock=lock)
    ds.delete("a < 3")
    ds.update({"a": "a + 100"}, where="a = 5")
    ds.merge_insert("a").when_not_matched_insert_all().execute(pa.table({"a": [1000]}))
    frags = engine.fragment.write_fragments(pa.table({"a": [7]}), path)
    engine.LanceDataset.commit(path, engine.LanceOperation.Append(frags), read_version=ds.version, commit_lock=lock)
    assert calls == [(step, v) for v in range(1, 7) for step in ("enter", "exit")]
    assert engine.dataset(path).version == 6


def test_commit_lock_failures(tmp_path):
    import contextlib

    @contextlib.contextmanager
    def fails_on_release(version):
        try:
            yield
        finally:
            raise RuntimeError("hello world!")

    @contextlib.contextmanager
    def refuses(version):
        raise lance_format.errors.CommitConflictError("taken")
        yield

    @contextlib.contextmanager
    def pylance_refuses(version):
        from lance.commit import CommitConflictError
        raise CommitConflictError("taken")
        yield

    for name, mod in ENGINES.items():
        path = str(tmp_path / name)
        with pytest.raises(OSError, match="hello world!"):
            mod.write_dataset(pa.table({"a": range(10)}), path, commit_lock=fails_on_release)
        assert mod.dataset(path).version == 1  # the version landed before the release failed
        for lock in (refuses, pylance_refuses):
            with pytest.raises(OSError, match="CommitConflictError"):
                mod.dataset(path, commit_lock=lock).delete("a < 5")
        assert mod.dataset(path).count_rows() == 10
        with pytest.raises(TypeError, match="commit_lock must be a function"):
            mod.write_dataset(pa.table({"a": [1]}), path, mode="append", commit_lock=3)


def test_detached_commits(tmp_path, engine):
    path = str(tmp_path / "t")
    ds = engine.write_dataset(pa.table({"x": [0]}), path)
    frag = engine.LanceFragment.create(path, pa.table({"x": [1]}))
    detached = ds.commit(path, engine.LanceOperation.Append([frag]), read_version=ds.version, detached=True)
    assert detached.version & (1 << 63)
    assert detached.to_table()["x"].to_pylist() == [0, 1]
    ds = engine.write_dataset(pa.table({"x": [2]}), path, mode="append")
    assert ds.to_table()["x"].to_pylist() == [0, 2] and [v["version"] for v in ds.versions()] == [1, 2]
    frag = engine.LanceFragment.create(path, pa.table({"x": [3]}))
    second = ds.commit(path, engine.LanceOperation.Append([frag]), read_version=detached.version, detached=True)
    # both engines open both detached versions
    for mod in ENGINES.values():
        assert mod.dataset(path, version=detached.version).to_table()["x"].to_pylist() == [0, 1]
        assert mod.dataset(path).checkout_version(second.version).to_table()["x"].to_pylist() == [0, 1, 3]
        assert mod.dataset(path).version == 2


def test_detached_commits_refused_with_v1_names(tmp_path, engine):
    path = str(tmp_path / "t")
    ds = engine.write_dataset(pa.table({"x": [0]}), path, enable_v2_manifest_paths=False)
    frag = engine.LanceFragment.create(path, pa.table({"x": [1]}))
    with pytest.raises(OSError, match="v1 manifest paths"):
        ds.commit(path, engine.LanceOperation.Append([frag]), read_version=ds.version, detached=True)


def test_fragment_from_a_scanner(tmp_path):
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    table = pa.table({"a": range(100), "b": range(100)})
    pq.write_to_dataset(table, str(tmp_path / "parquet"))
    for name, mod in ENGINES.items():
        path = str(tmp_path / name)
        fragment = mod.LanceFragment.create(path, pads.dataset(str(tmp_path / "parquet")).scanner())
        ds = mod.LanceDataset.commit(path, mod.LanceOperation.Overwrite(table.schema, [fragment]))
        assert ds.to_table() == table
        # a Lance scanner is a reader too
        copy = mod.write_dataset(ds.scanner(filter="a < 10"), str(tmp_path / f"{name}-copy"))
        assert copy.to_table() == table.slice(0, 10)


def test_tags_list_ordered(tmp_path):
    path = str(tmp_path / "t")
    for mode in ("create", "append", "append"):
        lance.write_dataset(pa.table({"a": [1, 2]}), path, mode=mode)
    for name, version in {"tag3": 3, "tag2": 2, "tag1": 1, "tagb": 1}.items():
        lance.dataset(path).tags.create(name, version)
    ours, theirs = lance_format.dataset(path).tags, lance.dataset(path).tags
    assert ours.list() == theirs.list()
    for order in ("asc", "desc", None):
        assert ours.list_ordered(order) == theirs.list_ordered(order), order
    assert ours.list_ordered() == theirs.list_ordered()
    for tags in (ours, theirs):
        with pytest.raises(ValueError, match="Invalid sort order"):
            tags.list_ordered("sideways")


def test_drop_removes_the_table_directory(tmp_path, engine):
    import os

    path = str(tmp_path / "t")
    engine.write_dataset(pa.table({"x": [0]}), path)
    engine.LanceDataset.drop(path)
    assert not os.path.exists(path)
    engine.LanceDataset.drop(path, ignore_not_found=True)
    for kwargs in ({}, {"ignore_not_found": False}):
        with pytest.raises(OSError):
            engine.LanceDataset.drop(path, **kwargs)


def test_binary_metadata_is_refused_like_pylance(tmp_path, engine):
    import base64
    import pickle

    data = pa.table({"a": range(5)})
    with pytest.raises(ValueError):
        engine.write_dataset(data.replace_schema_metadata({"foo": pickle.dumps("foo")}), str(tmp_path / "a"))
    field = pa.field("a", pa.int64(), metadata={"x": pickle.dumps("foo")})
    with pytest.raises(ValueError):
        engine.write_dataset(pa.table([pa.array([1])], schema=pa.schema([field])), str(tmp_path / "b"))
    ok = data.replace_schema_metadata({"foo": base64.b64encode(pickle.dumps("foo"))})
    assert engine.write_dataset(ok, str(tmp_path / "c")).count_rows() == 5


def test_optimize_enables_and_disables_auto_cleanup(tmp_path, engine):
    from lance.dataset import AutoCleanupConfig

    path = str(tmp_path / "t")
    ds = engine.write_dataset(pa.table({"a": [1]}), path)
    ds.optimize.enable_auto_cleanup(AutoCleanupConfig(interval=3, older_than_seconds=100))
    assert ds.version == 2
    assert ds.config() == {"lance.auto_cleanup.interval": "3", "lance.auto_cleanup.older_than": "100s"}
    ds.optimize.disable_auto_cleanup()
    assert ds.version == 3 and ds.config() == {}
    other = lance if engine is lance_format else lance_format
    assert other.dataset(path).config() == {}


def test_merge_insert_analyze_plan_reports_written_files(engine):
    data = pa.table([pa.array([1, 2, 3, 4]), pa.array(["a", "b", "c", "d"])], names=["id", "value"])
    ds = engine.write_dataset(data, "memory://analyze-merge")
    builder = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
    assert "MergeInsert" in builder.explain_plan() and "MergeInsert" in builder.explain_plan(verbose=True)
    plan = builder.analyze_plan(pa.table([pa.array([1, 5]), pa.array(["x", "y"])], names=["id", "value"]))
    metrics = re.search(r"^\s*MergeInsert:.*metrics=\[(.*?)\]", plan, re.MULTILINE)
    assert metrics, plan
    values = dict(item.split("=", 1) for item in metrics.group(1).split(", "))
    assert (values["num_inserted_rows"], values["num_updated_rows"], values["num_files_written"]) == ("1", "1", "1")
    assert int(values["bytes_written"]) > 0
    assert ds.version == 1 and ds.count_rows() == 4  # analyzing commits nothing


def test_merge_insert_bytes_written_match_pylance():
    data = pa.table({"id": pa.array(range(50)), "value": [f"v{i}" for i in range(50)]})
    source = pa.table({"id": pa.array([1, 70]), "value": ["x", "y"]})
    written = []
    for mod in ENGINES.values():
        ds = mod.write_dataset(data, "memory://bytes-written")
        plan = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().analyze_plan(source)
        written.append(re.search(r"bytes_written=(\d+)", plan).group(1))
    assert written[0] == written[1]


def test_metadata_cache_size_is_reported(tmp_path, engine):
    path = str(tmp_path / "t")
    engine.write_dataset(pa.table({"id": [1, 2, 3]}), path)
    ds = engine.dataset(path)
    ds.to_table()
    default = ds.session().size_bytes()
    ds = engine.dataset(path, metadata_cache_size_bytes=0)
    ds.to_table()
    assert default > 0 and ds.session().size_bytes() < default


def test_config_change_from_a_stale_version_after_cleanup(tmp_path, engine):
    """A config commit built on a version whose successors were cleaned up goes ahead."""
    path = str(tmp_path / "t")
    ds = engine.write_dataset(pa.table({"a": [1]}), path)
    for _ in range(3):
        engine.write_dataset(pa.table({"a": [1]}), path, mode="append")
    engine.dataset(path).cleanup_old_versions(older_than=__import__("datetime").timedelta(0))
    ds.update_config({"k": "v"})
    assert ds.version == 5 and engine.dataset(path).config() == {"k": "v"}
    assert engine.dataset(path).count_rows() == 4


@pytest.mark.parametrize("version", ["2.0", "2.1", None])
def test_append_some_columns(tmp_path, version):
    full = pa.schema([pa.field("id", pa.int64()), pa.field("other", pa.int64()), pa.field("name", pa.string())])
    tables = {}
    for name, mod in ENGINES.items():
        path = str(tmp_path / name)
        ds = mod.write_dataset(pa.table({"id": [1, 2], "other": [10, 20], "name": ["a", "b"]}, schema=full), path,
                               data_storage_version=version)
        ds.insert(pa.table({"id": [3, 4, 5]}))
        ds.insert(pa.table({"name": ["z"], "id": [6]}))
        ds.delete("id in (3, 6)")
        assert [f.metadata.files[0].fields for f in ds.get_fragments()][1] == [0]
        tables[name] = ds.to_table()
        # each engine reads the other's table, filters and takes on the missing columns included
        other = lance if mod is lance_format else lance_format
        theirs = other.dataset(path)
        assert theirs.to_table() == tables[name]
        assert theirs.to_table(filter="other is null").num_rows == 2
        assert ds.take([2, 3]).to_pylist() == theirs.take([2, 3]).to_pylist()
    assert tables["ours"] == tables["pylance"]


def test_append_of_a_subset_refused_like_pylance(tmp_path):
    not_null = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.int64(), nullable=False)])
    for name, mod in ENGINES.items():
        ds = mod.write_dataset(pa.table({"a": [1], "b": [2]}, schema=not_null), str(tmp_path / name))
        with pytest.raises(OSError):  # a non-nullable column cannot be left out
            ds.insert(pa.table({"a": [1]}, schema=pa.schema([not_null.field("a")])))
        with pytest.raises(OSError):  # an unknown column
            ds.insert(pa.table({"a": [1], "c": [2]}, schema=pa.schema([not_null.field("a"), pa.field("c", pa.int64())])))
        legacy = mod.write_dataset(pa.table({"a": [1], "b": [2]}), str(tmp_path / f"{name}-legacy"),
                                   data_storage_version="legacy")
        with pytest.raises(OSError):  # legacy fragments need every column
            legacy.insert(pa.table({"a": [5]}))
        assert ds.count_rows() == legacy.count_rows() == 1


def _pair(tmp_path, table: pa.Table, **write_options):
    path = str(tmp_path / "t")
    lance.write_dataset(table, path, **write_options)
    return lance_format.dataset(path), lance.dataset(path)


def test_take_rows_by_row_id(tmp_path):
    table = pa.table({"a": range(10), "b": [str(i) for i in range(10)]})
    for stable in (False, True):
        ours, theirs = _pair(tmp_path / str(stable), table, max_rows_per_file=4, enable_stable_row_ids=stable)
        for ds in (ours, theirs):
            ds.delete("a = 2")
        ids = theirs.to_table(with_row_id=True)["_rowid"].to_pylist()
        deleted = 2
        for args, kwargs in [
            (([ids[5], ids[0], ids[5]],), {"columns": ["a", "_rowid"]}),
            (([ids[0], deleted, ids[1]],), {}),
            (([ids[0], deleted, ids[1]],), {"ignore_deletions": True}),
            (([ids[1]],), {"columns": {"x": "a * 2", "up": "upper(b)"}}),
            (([],), {}),
        ]:
            assert ours._take_rows(*args, **kwargs) == theirs._take_rows(*args, **kwargs), (stable, args, kwargs)
        assert len(ours) == len(theirs) == 9
    ours, theirs = _pair(tmp_path / "bad", table, max_rows_per_file=4)
    for ds in (ours, theirs):
        with pytest.raises(OSError):
            ds._take_rows([1000])


@pytest.mark.parametrize("columns", [["_rowid", "_rowid"], ["_rowaddr", "a", "_rowid"], ["_rowid", "a", "_rowid"],
                                     ["b", "_rowaddr", "_rowaddr"], ["a", "a"], ["_rowaddr"]])
def test_take_with_repeated_and_system_columns(tmp_path, columns):
    ours, theirs = _pair(tmp_path, pa.table({"a": range(100), "b": range(100)}), max_rows_per_file=30)
    indices = [1, 2, 99, 45, 1]
    mine, expected = ours.take(indices, columns=columns), theirs.take(indices, columns=columns)
    assert mine.column_names == expected.column_names and mine.to_pydict() == expected.to_pydict()


def test_nested_projections(tmp_path):
    table = pa.table({
        "a": range(6),
        "struct": [{"x": i, "y": i % 2 == 0, "z": {"w": i * 3}} for i in range(6)],
        "list_struct": [[{"x": i, "y": i % 2 == 0}] for i in range(6)],
    })
    ours, theirs = _pair(tmp_path, table)
    for kwargs in [
        {"columns": ["struct.x"]},
        {"columns": ["struct.y", "a", "struct.z.w"], "filter": "a > 2"},
        {"columns": {"list_struct": "list_struct[1]['x']"}},
        {"columns": {"v": "list_struct[2]['y']"}},
        {"columns": ["a"], "filter": "list_struct[1]['x'] > 3"},
    ]:
        assert ours.to_table(**kwargs) == theirs.to_table(**kwargs), kwargs


def _field_view(schema, name):
    return next(f for f in schema.fields() if f.name() == name)


def test_lance_schema_fields_like_pylance(tmp_path):
    table = pa.table({"a": [1, 2], "b": ["x", "y"], "s": [{"x": 1, "y": "p"}, {"x": 2, "y": "q"}]})
    datasets = _both(tmp_path, table)
    for ds in datasets.values():
        ds.update_field_metadata({"a": {"k1": "v1", "k2": "v2"}, "b": {"unit": "count"}})
        ds.update_field_metadata({"a": {"k1": "new", "k2": None, "k3": "v3"}})
    ours, theirs = lance_format.dataset(datasets["ours"].uri), datasets["pylance"]
    views = [(f.name(), f.id(), f.metadata, [(c.name(), c.id()) for c in f.children()], f.to_arrow())
             for f in ours.lance_schema.fields()]
    expected = [(f.name(), f.id(), f.metadata, [(c.name(), c.id()) for c in f.children()], f.to_arrow())
                for f in lance.dataset(theirs.uri).lance_schema.fields()]
    assert views == expected
    assert _field_view(ours.lance_schema, "a").metadata == {"k1": "new", "k3": "v3"}
    assert ours.lance_schema.fields[0].name == "a"  # still a list of this engine's fields
    for ds in (ours, lance.dataset(theirs.uri)):
        ds.update_field_metadata({"a": {"only": "this"}}, replace=True)
        assert _field_view(ds.lance_schema, "a").metadata == {"only": "this"}


def test_update_config_operation(tmp_path):
    schema = pa.schema([pa.field("a", pa.int64(), metadata={"field_a": "original"}),
                        pa.field("b", pa.int64(), metadata={"field_b": "original"})], metadata={"schema_key": "o"})
    results = {}
    for name, mod in ENGINES.items():
        path = str(tmp_path / name)
        mod.write_dataset(pa.table({"a": [1, 2], "b": [3, 4]}, schema=schema), path)
        op = mod.LanceOperation
        steps = [
            op.UpdateConfig(config_updates=op.UpdateMap({"key1": "v1", "key2": "v2"}, replace=False)),
            op.UpdateConfig(config_updates=op.UpdateMap({"key1": None}, replace=False)),
            op.UpdateConfig(schema_metadata_updates=op.UpdateMap({"new": "x", "schema_key": "u"}, replace=False)),
            op.UpdateConfig(field_metadata_updates={0: op.UpdateMap({"field_a": "u", "n": "v"}, replace=False),
                                                    1: op.UpdateMap({"field_b": "u"}, replace=True)}),
        ]
        for version, step in enumerate(steps, start=1):
            ds = mod.LanceDataset.commit(path, mod.Transaction(read_version=version, operation=step))
        results[name] = (ds.version, ds.config(), ds.schema_metadata,
                         [(f.name(), f.metadata) for f in ds.lance_schema.fields()])
    assert results["ours"] == results["pylance"]


SQL_QUERIES = [
    ("SELECT * FROM dataset", {}),
    ("SELECT * FROM test WHERE id > 1", {"table_name": "test"}),
    ("SELECT value FROM test WHERE id = 1", {"table_name": "test"}),
    ("SELECT id as user_id, UPPER(value) as val FROM dataset WHERE id BETWEEN 1 AND 3", {}),
    ("SELECT id FROM dataset ORDER BY id DESC LIMIT 2", {}),
    ("SELECT id, value FROM dataset ORDER BY id ASC NULLS FIRST", {}),
    ("SELECT id, value FROM dataset ORDER BY id DESC NULLS LAST", {}),
    ("SELECT id, value FROM dataset ORDER BY id", {}),
    ("SELECT id, value FROM dataset ORDER BY value DESC, id", {}),
    ("SELECT value AS v, id FROM dataset WHERE value <> 'b' LIMIT 2 OFFSET 1", {}),
    ("SELECT id FROM dataset", {"with_row_id": True}),
    ("SELECT id * 10 AS big FROM dataset WHERE id IS NOT NULL", {}),
]


@pytest.mark.parametrize("query, options", SQL_QUERIES)
def test_sql_queries_like_pylance(tmp_path, query, options):
    ours, theirs = _pair(tmp_path, pa.table({"id": [1, 2, 3, None], "value": ["a", "b", "c", "d"]}))
    results = []
    for ds in (ours, theirs):
        builder = ds.sql(query)
        for name, value in options.items():
            builder = getattr(builder, name)(value)
        built = builder.build()
        results.append((pa.Table.from_batches(built.to_batch_records()).to_pydict(),
                        built.to_stream_reader().read_all().to_pydict()))
    assert results[0] == results[1]


@pytest.mark.parametrize("query", [
    "SELECT COUNT(*) AS n FROM dataset",
    "SELECT value, sum(id) AS s FROM dataset GROUP BY value",
    "SELECT DISTINCT value FROM dataset",
    "SELECT id + 1 FROM dataset",
    "SELECT a.id FROM dataset a JOIN dataset b ON a.id = b.id",
])
def test_sql_beyond_one_scan_is_refused(tmp_path, query):
    ours, theirs = _pair(tmp_path, pa.table({"id": [1, 2, 3], "value": ["a", "b", "c"]}))
    with pytest.raises(lance_format.errors.UnsupportedFeatureError):
        ours.sql(query).build()
    theirs.sql(query).build().to_batch_records()  # pylance answers these (through DataFusion)


def test_sql_unknown_table(tmp_path):
    ours, theirs = _pair(tmp_path, pa.table({"id": [1]}))
    for ds in (ours, theirs):
        with pytest.raises(ValueError, match="not found"):
            ds.sql("SELECT * FROM elsewhere").build().to_batch_records()


def test_default_batches_have_pylance_shapes(tmp_path):
    datasets = _both(tmp_path, pa.table({"a": np.arange(100_000), "b": np.arange(100_000) * 2}),
                     max_rows_per_file=30_000)
    shapes = {name: [[b.num_rows for b in ds.to_batches(**kwargs)]
                     for kwargs in ({}, {"batch_size": 7000}, {"columns": ["b"], "limit": 20_000, "offset": 5})]
              for name, ds in datasets.items()}
    assert shapes["ours"] == shapes["pylance"]
    assert max(max(s) for s in shapes["ours"]) == 8192
    # filtered scans: batches never exceed pylance's default either
    assert max(b.num_rows for b in datasets["ours"].to_batches(filter="a % 3 = 0")) <= 8192
