"""pylance's LanceDataset extras (inspection, convenience writes, schema JSON), call for call.

Each test runs the same calls against pylance (the oracle) and lance_format, on tables written
by either engine, and compares what they return and what the table looks like afterwards.
"""

from __future__ import annotations

import os
import warnings

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    InvalidInputError,
    SchemaMismatchError,
    TagError,
    UnsupportedFeatureError,
)

ENGINES = {"ours": lance_format, "pylance": lance}


def _orders(n: int = 40) -> pa.Table:
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "email": [f"customer-{i:05d}@example.com" if i % 7 else None for i in range(n)],
        "cat": [["alpha", "beta", "alpha", "gamma"][i % 4] for i in range(n)],
        "amount": [i * 1.5 for i in range(n)],
        "tags": [[f"t{i % 3}", "x"] if i % 5 else [] for i in range(n)],
        "addr": [{"city": f"c{i % 6}", "zip": i} for i in range(n)],
    })


@pytest.fixture(params=["ours", "pylance"])
def table(request, tmp_path) -> str:
    """A table with several fragments and deletions, written by one engine or the other."""
    engine = ENGINES[request.param]
    path = str(tmp_path / "orders.lance")
    engine.write_dataset(_orders(), path, max_rows_per_file=15)
    engine.write_dataset(_orders(10), path, mode="append")
    engine.dataset(path).delete("id % 9 = 0")
    return path


def test_get_version_and_version_refs(table):
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    assert ours.get_version() == theirs.get_version()
    assert ours.get_version() == ours.versions()[-1]
    assert ours.version_refs() == theirs.version_refs() == [{"version": v} for v in (1, 2, 3)]
    assert lance_format.dataset(table, version=1).get_version() == lance.dataset(table, version=1).get_version()


def test_fragment_ids(table):
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    assert list(ours.fragment_ids()) == list(theirs.fragment_ids()) == [0, 1, 2, 3]
    assert 2 in ours.fragment_ids() and 7 not in ours.fragment_ids()
    assert len(ours.fragment_ids()) == len(theirs.fragment_ids())


def test_stats(table):
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    assert ours.stats.dataset_stats() == theirs.stats.dataset_stats()
    assert ours.stats.dataset_stats(max_rows_per_group=12) == theirs.stats.dataset_stats(max_rows_per_group=12)
    ours_fields = [(f.id, f.bytes_on_disk) for f in ours.stats.data_stats().fields]
    theirs_fields = [(f.id, f.bytes_on_disk) for f in theirs.stats.data_stats().fields]
    assert ours_fields == theirs_fields
    assert all(size > 0 for fid, size in ours_fields if fid in (0, 1, 2, 3))
    with pytest.raises(KeyError, match="no_such_index"):  # pylance: KeyError('Index "no_such_index" not found')
        ours.stats.index_stats("no_such_index")
    with pytest.raises(KeyError, match="no_such_index"):
        theirs.stats.index_stats("no_such_index")


def test_validate_passes_and_catches_a_damaged_table(table):
    assert lance_format.dataset(table).validate() is None
    assert lance.dataset(table).validate() is None
    ds = lance_format.dataset(table)
    data_file = ds.get_fragments()[1].data_files()[0].path
    os.remove(os.path.join(table, "data", data_file))
    with pytest.raises(CorruptFileError, match="does not exist"):
        lance_format.dataset(table).validate()


def test_validate_catches_a_file_with_the_wrong_row_count(tmp_path):
    a, b = str(tmp_path / "a.lance"), str(tmp_path / "b.lance")
    lance_format.write_dataset(pa.table({"x": range(5)}), a)
    lance_format.write_dataset(pa.table({"x": range(6)}), b)
    name_a = lance_format.dataset(a).get_fragments()[0].data_files()[0].path
    name_b = lance_format.dataset(b).get_fragments()[0].data_files()[0].path
    os.replace(os.path.join(b, "data", name_b), os.path.join(a, "data", name_a))
    with pytest.raises(CorruptFileError, match="6 rows but fragment 0 has 5"):
        lance_format.dataset(a).validate()


def test_sample_and_slice(table):
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    whole = ours.to_table()
    from collections import Counter

    sample = ours.sample(12, columns=["id", "cat"])
    assert sample.num_rows == 12 and sample.schema.names == ["id", "cat"]
    rows = Counter(zip(sample.column("id").to_pylist(), sample.column("cat").to_pylist()))
    table_rows = Counter(zip(whole.column("id").to_pylist(), whole.column("cat").to_pylist()))
    assert not rows - table_rows  # distinct rows of the table (ids repeat across the two writes)
    everything = ours.sample(whole.num_rows, randomize_order=False)
    assert everything.to_pydict() == whole.to_pydict()  # in table order
    assert theirs.sample(5).num_rows == ours.sample(5).num_rows
    with pytest.raises(InvalidInputError):
        ours.sample(whole.num_rows + 1)
    assert ours.slice(3, 11).equals(theirs.slice(3, 11))
    assert ours.slice(30, 100, columns=["email"]).equals(theirs.slice(30, 100, columns=["email"]))
    assert ours.slice(4, 4).num_rows == 0
    for start, end in ((-1, 3), (5, 2)):
        with pytest.raises(ValueError):
            theirs.slice(start, end)
        with pytest.raises(InvalidInputError):
            ours.slice(start, end)


def test_tracked_and_all_files(table):
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    calls = []
    tracked = ours.tracked_files(progress=lambda done, total: calls.append((done, total))).read_all()
    expected = theirs.tracked_files().read_all()
    assert tracked.schema == expected.schema
    key = ["version", "path", "type"]

    def rows(t):
        return sorted(zip(*(t.column(k).cast(pa.string()).to_pylist() if k == "type" else t.column(k).to_pylist()
                            for k in key)))

    assert rows(tracked) == rows(expected)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert rows(ours.tracked_files(min_version=3).read_all()) == rows(theirs.tracked_files(min_version=3).read_all())
    files = ours.all_files().read_all()
    assert files.schema == theirs.all_files().read_all().schema
    assert sorted(files.column("path").to_pylist()) == sorted(theirs.all_files().read_all().column("path").to_pylist())
    sizes = dict(zip(files.column("path").to_pylist(), files.column("size_bytes").to_pylist()))
    assert all(sizes[p] == os.path.getsize(os.path.join(table, p)) for p in sizes)


def test_explain_cleanup_matches_cleanup_and_pylance(tmp_path):
    paths = {}
    for name, engine in ENGINES.items():
        path = paths[name] = str(tmp_path / f"{name}.lance")
        engine.write_dataset(_orders(), path, max_rows_per_file=15)
        engine.dataset(path).delete("id < 5")
        engine.write_dataset(_orders(20), path, mode="overwrite")
    explained = {}
    for name, engine in ENGINES.items():
        ds = engine.dataset(paths[name])
        explained[name] = ds.explain_cleanup_old_versions(retain_versions=1, include_files=True)
        assert ds.version == 3 and len(ds.versions()) == 3  # nothing was deleted
    ours, theirs = explained["ours"], explained["pylance"]
    assert ours.read_version == theirs.read_version == 3
    for counter in ("old_versions", "data_files_removed", "transaction_files_removed", "deletion_files_removed",
                    "index_files_removed", "failed_deletes"):
        assert getattr(ours.stats, counter) == getattr(theirs.stats, counter), counter

    def kinds(explanation):
        return sorted(c.kind for c in explanation.candidate_files)

    assert kinds(ours) == kinds(theirs)
    for candidate in ours.candidate_files:  # object-store paths, as pylance prints them
        relative = candidate.path.split("ours.lance/", 1)[1]
        assert relative.split("/")[0] in ("data", "_deletions", "_transactions", "_versions")
    truncated = lance_format.dataset(paths["ours"]).explain_cleanup_old_versions(retain_versions=1,
                                                                                 include_files=True, max_files=2)
    assert truncated.candidate_files_truncated and len(truncated.candidate_files) == 2
    assert truncated.warnings == ["candidate_files truncated to 2 entries"]
    assert lance_format.dataset(paths["ours"]).explain_cleanup_old_versions(retain_versions=1).candidate_files == []
    stats = lance_format.dataset(paths["ours"]).cleanup_old_versions(retain_versions=1)
    assert stats == ours.stats  # the explanation predicted exactly what cleanup removed
    with pytest.raises(InvalidInputError):
        lance_format.dataset(paths["ours"]).explain_cleanup_old_versions(max_files=0)


def test_explain_cleanup_refuses_tagged_versions_like_cleanup(tmp_path):
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"x": [1]}), path)
    lance_format.write_dataset(pa.table({"x": [2]}), path, mode="overwrite")
    ds = lance_format.dataset(path)
    ds.tags.create("keep", 1)
    with pytest.raises(TagError):
        ds.explain_cleanup_old_versions(retain_versions=1)
    assert ds.explain_cleanup_old_versions(retain_versions=1, error_if_tagged_old_versions=False).stats.old_versions == 0


def test_insert(table, tmp_path):
    import shutil

    extra = _orders(3).set_column(0, "id", pa.array([100, 101, 102], pa.int64()))
    results = {}
    for name, engine in ENGINES.items():
        copy = str(tmp_path / f"insert-{name}.lance")
        shutil.copytree(table, copy)
        ds = engine.dataset(copy)
        ds.insert(extra)
        assert ds.version == 4  # this object moved to the new version
        results[name] = ds.to_table()
        ds.insert(extra, mode="overwrite")
        assert ds.version == 5 and ds.count_rows() == 3
    assert results["ours"].equals(results["pylance"])
    assert results["ours"].num_rows == lance.dataset(table).count_rows() + 3


def test_merge_joins_new_columns_like_pylance(tmp_path):
    right = pa.table({"key": [3, 1, 9, 1, None], "score": [30.0, 10.0, 90.0, 11.0, 5.0],
                      "label": ["three", "one", "nine", "one-again", "none"]})
    out = {}
    for name, engine in ENGINES.items():
        path = str(tmp_path / f"{name}.lance")
        engine.write_dataset(pa.table({"key": [1, 2, 3, 4, None], "v": list("abcde")}), path, max_rows_per_file=2)
        ds = engine.dataset(path)
        ds.delete("key = 2")
        ds.merge(right, "key")
        out[name] = ds
    ours, theirs = out["ours"], out["pylance"]
    assert ours.version == theirs.version == 3
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table().column("label").to_pylist() == ["one-again", "three", None, "none"]
    # each engine reads the other's merged table the same way
    assert lance.dataset(ours.uri).to_table().equals(lance_format.dataset(theirs.uri).to_table())
    assert [len(f.data_files()) for f in ours.get_fragments()] == [len(f.data_files()) for f in theirs.get_fragments()]


def test_merge_with_right_on_and_a_type_to_cast(tmp_path):
    path = str(tmp_path / "m.lance")
    lance_format.write_dataset(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), path)
    ds = lance_format.dataset(path)
    ds.merge(pa.table({"other_id": pa.array([2, 3], pa.int32()), "w": ["two", "three"]}), "id", right_on="other_id")
    assert ds.to_table().to_pydict() == {"id": [1, 2, 3], "w": [None, "two", "three"]}
    assert lance.dataset(path).to_table().to_pydict() == ds.to_table().to_pydict()


@pytest.mark.parametrize("right, kwargs, message", [
    (pa.table({"k": [1], "w": [1]}), {}, "Column id does not exist in the right side"),
    (pa.table({"id": [1], "v": [1]}), {}, "Column v exists in both sides"),
    (pa.table({"id": [1], "w": [1]}), {"left_on": "nope", "right_on": "id"},
     "Column nope does not exist in the left side"),
    (pa.table({"id": ["x"], "w": [1]}), {}, "cannot join id"),
])
def test_merge_refuses_bad_input_and_commits_nothing(tmp_path, right, kwargs, message):
    path = str(tmp_path / "m.lance")
    lance_format.write_dataset(pa.table({"id": [1, 2], "v": [1, 2]}), path)
    ds = lance_format.dataset(path)
    with pytest.raises(SchemaMismatchError, match=message) as info:
        ds.merge(right, kwargs.get("left_on", "id"), right_on=kwargs.get("right_on"))
    assert isinstance(info.value, OSError)  # pylance raises OSError here too
    assert lance_format.dataset(path).version == 1


def test_truncate_table(table, tmp_path):
    import shutil

    for name, engine in ENGINES.items():
        copy = str(tmp_path / f"truncate-{name}.lance")
        shutil.copytree(table, copy)
        ds = engine.dataset(copy)
        schema, version = ds.schema, ds.version
        ds.truncate_table()
        assert ds.count_rows() == 0 and ds.schema == schema and ds.version == version + 1
        assert lance.dataset(copy).count_rows() == lance_format.dataset(copy).count_rows() == 0
        assert lance_format.dataset(copy, version=version).count_rows() == lance.dataset(table).count_rows()


def test_truncate_written_by_us_reads_in_pylance(tmp_path):
    path = str(tmp_path / "t.lance")
    lance_format.write_dataset(_orders(), path, max_rows_per_file=10)
    ds = lance_format.dataset(path)
    ds.truncate_table()
    theirs = lance.dataset(path)
    assert theirs.count_rows() == 0 and theirs.schema == ds.schema and theirs.version == 2
    assert theirs.get_fragments() == []


def test_replace_metadata_warns_and_commits(table):
    for engine in ENGINES.values():
        ds = engine.dataset(table)
        with pytest.warns(DeprecationWarning):
            ds.replace_schema_metadata({"owner": "data-eng"})
        with pytest.warns(DeprecationWarning):
            ds.replace_field_metadata("email", {"pii": "true"})
    ours, theirs = lance_format.dataset(table), lance.dataset(table)
    assert ours.schema == theirs.schema
    assert ours.schema.metadata == {b"owner": b"data-eng"}
    assert ours.schema.field("email").metadata == {b"pii": b"true"}
    with pytest.raises(UnsupportedFeatureError):
        ours.replace_schema(ours.schema)


def test_drop(tmp_path):
    path = str(tmp_path / "d.lance")
    lance_format.write_dataset(pa.table({"x": [1]}), path)
    lance_format.LanceDataset.drop(path)
    with pytest.raises(DatasetNotFoundError):
        lance_format.dataset(path)
    with pytest.raises(DatasetNotFoundError):
        lance_format.LanceDataset.drop(path)
    lance_format.LanceDataset.drop(path, ignore_not_found=True)
    other = tmp_path / "not-a-table"
    other.mkdir()
    (other / "keep.txt").write_text("user data")
    with pytest.raises(DatasetNotFoundError):
        lance_format.LanceDataset.drop(str(other))
    assert (other / "keep.txt").read_text() == "user data"


SCHEMAS = [
    pa.schema([pa.field("a", pa.int64(), nullable=False, metadata={"k": "v"}),
               pa.field("b", pa.list_(pa.struct([("c", pa.string()), ("d", pa.float32())]))),
               pa.field("e", pa.dictionary(pa.int16(), pa.string())),
               pa.field("f", pa.list_(pa.float32(), 4)),
               pa.field("t", pa.timestamp("us", tz="UTC")),
               pa.field("dec", pa.decimal128(10, 2)),
               pa.field("lb", pa.large_binary()),
               pa.field("d32", pa.date32()),
               pa.field("ll", pa.large_list(pa.int8())),
               pa.field("h", pa.float16()),
               pa.field("fb", pa.binary(3)),
               pa.field("du", pa.duration("ms")),
               pa.field("ts", pa.timestamp("s"))], metadata={"x": "y"}),
    pa.schema([pa.field("only", pa.string())]),
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_schema_json_round_trip_like_pylance(schema):
    ours = lance_format.schema_to_json(schema)
    assert ours == lance.schema_to_json(schema)
    assert lance_format.json_to_schema(ours).equals(schema, check_metadata=True)
    assert lance.json_to_schema(ours).equals(lance_format.json_to_schema(lance.schema_to_json(schema)),
                                             check_metadata=True)


def test_schema_json_refuses_what_pylance_refuses():
    with pytest.raises(ValueError):
        lance.schema_to_json(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
    with pytest.raises(InvalidInputError):
        lance_format.schema_to_json(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
    for bad in ({}, {"fields": [{"name": "a"}]}, {"fields": [{"name": "a", "type": {"type": "no_such_type"}}]}):
        with pytest.raises(InvalidInputError):
            lance_format.json_to_schema(bad)


def test_module_names_exist():
    assert isinstance(lance_format.__version__, str) and lance_format.__version__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lance_format.LanceStats and lance_format.CleanupExplanation and lance_format.DataStatistics


def test_merge_insert_defaults_to_the_primary_key_like_pylance(tmp_path):
    key = {"lance-schema:unenforced-primary-key": "true"}
    schema = pa.schema([pa.field("id", pa.int64(), False, metadata=key), pa.field("v", pa.string())])
    new = pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=schema)
    results = {}
    for name, engine in ENGINES.items():
        path = str(tmp_path / f"{name}.lance")
        ds = engine.write_dataset(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema), path)
        results[name] = ds.merge_insert().when_matched_update_all().when_not_matched_insert_all().execute(new)
        assert sorted(lance.dataset(path).to_table().to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "c"}]
        # pylance reads our flag from the manifest, and we read its flag
        assert [f.name() for f in lance.dataset(path).lance_schema.unenforced_primary_key()] == ["id"]
        assert [f.name for f in lance_format.dataset(path).lance_schema.unenforced_primary_key()] == ["id"]
    assert results["ours"] == results["pylance"]
    plain = lance_format.write_dataset(pa.table({"id": [1]}), str(tmp_path / "plain.lance"))
    with pytest.raises(InvalidInputError, match="primary key"):
        plain.merge_insert()


def test_batch_udf_like_pylance(tmp_path):
    results = {}
    for name, engine in ENGINES.items():
        path = str(tmp_path / f"{name}.lance")
        ds = engine.write_dataset(pa.table({"id": list(range(10))}), path, max_rows_per_file=4)

        @engine.batch_udf(output_schema=pa.schema([pa.field("double", pa.int64())]))
        def double(batch):
            return pa.record_batch([pa.compute.multiply(batch.column("id"), 2)], names=["double"])

        ds.add_columns(double, read_columns=["id"])
        results[name] = lance.dataset(path).to_table()
    assert results["ours"].equals(results["pylance"])
    from lance_format.schema import LanceSchema

    arrow = pa.schema([pa.field("a", pa.int64())])
    assert LanceSchema.from_pyarrow(arrow).to_pyarrow() == arrow


def test_batch_udf_output_is_checked(tmp_path):
    ds = lance_format.write_dataset(pa.table({"id": [1, 2]}), str(tmp_path / "t.lance"))

    @lance_format.batch_udf(output_schema=pa.schema([pa.field("x", pa.int64())]))
    def wrong(batch):
        return pa.record_batch([batch.column("id")], names=["y"])

    with pytest.raises(SchemaMismatchError):
        ds.add_columns(wrong)
    assert lance_format.dataset(str(tmp_path / "t.lance")).version == 1
