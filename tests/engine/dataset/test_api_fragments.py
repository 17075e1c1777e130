"""pylance's distributed-write API (``lance.fragment``, ``LanceOperation``, ``LanceDataset.commit``),
run call for call against pylance and this engine, and across them: fragments one engine wrote
are committed by the other (through pylance's JSON), and both then read the table alike."""

from __future__ import annotations

import json
import pickle
from types import ModuleType

import lance
import lance.progress
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import (
    ArgumentTypeError,
    CommitConflictError,
    CorruptFileError,
    InvalidInputError,
    RetryableCommitConflictError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from tests.compat import assert_same_history, assert_tables_equal

ENGINES = [lance, lance_format]
TABLE = pa.table({"id": list(range(10)), "s": [f"v{i}" for i in range(10)]})


def _shape(fragment) -> dict:
    """A fragment description without what differs between any two writes (names, sizes, ids)."""
    out = fragment.to_json()
    for f in out["files"]:
        f.pop("path"), f.pop("file_size_bytes")
    if out["deletion_file"]:
        out["deletion_file"].pop("id")
    return out


def _rows(ds) -> list[dict]:
    return sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])


def _distributed_write(engine: ModuleType, uri: str) -> list:
    """Workers create fragments, the driver creates the table, appends, then deletes via fragments."""
    first = [engine.fragment.LanceFragment.create(uri, TABLE.slice(0, 4)),
             engine.fragment.LanceFragment.create(uri, TABLE.slice(4, 6))]
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Overwrite(TABLE.schema, first))
    more = engine.fragment.write_fragments(pa.table({"id": [10, 11, 12], "s": ["a", "b", "c"]}), uri,
                                           max_rows_per_file=2)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Append(more), read_version=ds.version)
    updated, removed = [], []
    for fragment in ds.get_fragments():
        new = fragment.delete("id % 3 = 0 OR id = 12")
        if new is None:
            removed.append(fragment.fragment_id)
        else:
            updated.append(new)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Delete(updated, removed, "id % 3 = 0 OR id = 12"),
                                    read_version=ds.version)
    return [first, more, updated, removed, ds]


def test_distributed_write_like_pylance(tmp_path):
    theirs = _distributed_write(lance, str(tmp_path / "theirs"))
    ours = _distributed_write(lance_format, str(tmp_path / "ours"))
    for mine, other in zip(ours[:3], theirs[:3]):
        assert [_shape(f) for f in mine] == [_shape(f) for f in other]
    assert ours[3] == theirs[3]
    assert ours[4].version == theirs[4].version == 3
    assert _rows(ours[4]) == _rows(theirs[4])
    assert_same_history(str(tmp_path / "ours"))
    # fragment properties after the delete
    for a, b in zip(ours[4].get_fragments(), theirs[4].get_fragments()):
        assert (a.fragment_id, a.physical_rows, a.num_deletions, a.count_rows(), a.count_rows("id > 4")) == (
            b.fragment_id, b.physical_rows, b.num_deletions, b.count_rows(), b.count_rows("id > 4"))
        assert _shape(a.metadata) == _shape(b.metadata)
        assert [(d.fields, d.column_indices) for d in a.data_files()] == [(d.fields, d.column_indices)
                                                                          for d in b.data_files()]
        assert a.count_rows(pc.field("id") > 4) == b.count_rows(pc.field("id") > 4)
        assert a.validate() is None and b.validate() is None


@pytest.mark.parametrize("writer, committer", [(lance, lance_format), (lance_format, lance)])
def test_fragments_cross_engines_through_json(tmp_path, writer, committer):
    uri = str(tmp_path / "t")
    created = [writer.fragment.LanceFragment.create(uri, TABLE.slice(0, 5)),
               writer.fragment.LanceFragment.create(uri, TABLE.slice(5))]
    received = [committer.fragment.FragmentMetadata.from_json(json.dumps(f.to_json())) for f in created]
    assert [f.to_json() for f in received] == [f.to_json() for f in created]
    committer.LanceDataset.commit(uri, committer.LanceOperation.Overwrite(TABLE.schema, received))
    # the other engine appends to it in turn
    extra = committer.fragment.LanceFragment.create(uri, pa.table({"id": [99], "s": ["z"]}))
    back = writer.fragment.FragmentMetadata.from_json(json.dumps(extra.to_json()))
    writer.LanceDataset.commit(uri, writer.LanceOperation.Append([back]), read_version=1)
    assert_tables_equal(lance_format.dataset(uri).to_table(), lance.dataset(uri).to_table())
    assert lance_format.dataset(uri).count_rows() == 11
    assert_same_history(uri)


def test_fragment_metadata_values_like_pylance(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(TABLE, uri, enable_stable_row_ids=True)
    lance.dataset(uri).delete("id < 3")
    theirs = lance.dataset(uri).get_fragment(0).metadata
    ours = lance_format.dataset(uri).get_fragment(0).metadata
    assert ours.to_json() == theirs.to_json()  # deletion file, row ids and row versions included
    assert lance_format.fragment.FragmentMetadata.from_json(json.dumps(theirs.to_json())) == ours
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert (ours.num_deletions, ours.num_rows) == (theirs.num_deletions, theirs.num_rows) == (3, 7)
    assert repr(ours.deletion_file) == repr(theirs.deletion_file)
    assert ours.deletion_file.path(0) == theirs.deletion_file.path(0)
    assert ours.deletion_file.json() == theirs.deletion_file.json()
    assert ours.row_id_meta.json() == theirs.row_id_meta.json()
    assert repr(ours.files[0]) == repr(theirs.files[0]) and ours.files[0].path == theirs.files[0].path
    for ids in ([1, 2, 5], list(range(100)), [], [7, 3]):
        mine, other = lance_format.fragment.RowIdSequence(ids), lance.fragment.RowIdSequence(ids)
        assert mine.to_inline_metadata().asdict() == other.to_inline_metadata().asdict()
        assert mine.to_pyarrow().equals(other.to_pyarrow()) and repr(mine) == repr(other)
        assert lance_format.fragment.RowIdSequence.from_inline_metadata(mine.to_inline_metadata()) == mine
    made = lance_format.fragment.DeletionFile(1, 5, "bitmap", 3)
    assert made.asdict() == lance.fragment.DeletionFile(1, 5, "bitmap", 3, None).asdict()
    assert made.path(7) == "_deletions/7-1-5.bin"
    assert lance_format.fragment.DeletionFile.from_json(made.json()) == made


def test_transactions_read_like_pylance(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(TABLE, uri, max_rows_per_file=4, commit_message="first")
    ds = lance.dataset(uri)
    ds.delete("id = 2")
    ds.add_columns({"x": "id * 2"})
    ds.drop_columns(["x"])
    ds.update_config({"k": "v"})
    ds.optimize.compact_files()
    lance.dataset(uri, version=2).restore()
    ds = lance.dataset(uri)
    ds.update({"s": "'u'"}, where="id = 5")
    ds.create_scalar_index("id", "BTREE")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    mine, other = ours.get_transactions(20), theirs.get_transactions(20)
    assert len(mine) == len(other) == ours.version
    for a, b in zip(mine, other):
        assert type(a.operation).__name__ == type(b.operation).__name__
        assert (a.read_version, a.uuid, a.transaction_properties) == (b.read_version, b.uuid,
                                                                     b.transaction_properties)
        fields = [f for f in ("fragments", "updated_fragments", "new_fragments") if hasattr(b.operation, f)]
        for name in fields:
            assert [f.to_json() for f in getattr(a.operation, name)] == [f.to_json() for f in
                                                                       getattr(b.operation, name)]
        for name in ("deleted_fragment_ids", "removed_fragment_ids", "predicate", "version", "fields_modified",
                     "update_mode", "preserves_nullability"):
            if hasattr(b.operation, name):
                assert getattr(a.operation, name) == getattr(b.operation, name), name
        if hasattr(b.operation, "groups"):
            assert [([f.to_json() for f in g.old_fragments], [f.to_json() for f in g.new_fragments])
                    for g in a.operation.groups] == [([f.to_json() for f in g.old_fragments],
                                                      [f.to_json() for f in g.new_fragments])
                                                     for g in b.operation.groups]
    index, their_index = mine[0].operation.new_indices[0], other[0].operation.new_indices[0]
    assert (index.uuid, index.name, index.fields, index.dataset_version, index.created_at, index.index_details) == (
        their_index.uuid, their_index.name, their_index.fields, their_index.dataset_version,
        their_index.created_at, their_index.index_details)
    assert index.fragment_ids == set(their_index.fragment_ids)
    assert ours.read_transaction(1).transaction_properties == theirs.read_transaction(1).transaction_properties
    assert type(ours.read_transaction(1).operation.new_schema).__name__ == "LanceSchema"
    assert ours.read_transaction(1).operation.new_schema.to_arrow() == TABLE.schema
    assert ours.get_transactions(2) == mine[:2]


def _operations(engine: ModuleType, uri: str) -> list:
    """Merge (merge_columns), Update, Rewrite and Restore through the commit API."""
    engine.write_dataset(TABLE, uri, max_rows_per_file=5)
    ds = engine.dataset(uri)
    merged, schema = [], None
    for fragment in ds.get_fragments():
        new, schema = fragment.merge_columns({"twice": "id * 2"})
        merged.append(new)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Merge(merged, schema), read_version=ds.version)
    udf = []
    for fragment in ds.get_fragments():
        new, schema = fragment.merge_columns(lambda b: pa.record_batch([pc.add(b["id"], 100)], ["plus"]),
                                             columns=["id"])
        udf.append(new)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Merge(udf, schema), read_version=ds.version)
    first = ds.get_fragment(0)
    kept = first.delete("id = 0")
    replacement = engine.fragment.write_fragments(pa.table({"id": [0], "s": ["new"], "twice": [0], "plus": [100]}),
                                                  uri)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Update(updated_fragments=[kept],
                                                                      new_fragments=replacement),
                                    read_version=ds.version)
    frags = ds.get_fragments()
    rewritten = engine.fragment.write_fragments(pa.concat_tables([f.to_table() for f in frags[:2]]), uri)
    group = engine.LanceOperation.RewriteGroup([f.metadata for f in frags[:2]], rewritten)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Rewrite([group], []), read_version=ds.version)
    after_rewrite = _rows(ds)
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Restore(2))
    return [after_rewrite, _rows(ds), ds.version, [f.fragment_id for f in engine.dataset(uri, 5).get_fragments()]]


def test_operations_like_pylance(tmp_path):
    ours = _operations(lance_format, str(tmp_path / "ours"))
    theirs = _operations(lance, str(tmp_path / "theirs"))
    assert ours == theirs
    assert ours[0][0] == {"id": 0, "s": "new", "twice": 0, "plus": 100}
    assert_same_history(str(tmp_path / "ours"))


def test_project_commits_a_schema_pylance_reads(tmp_path):
    uri = str(tmp_path / "t")
    lance.write_dataset(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [True, False]}), uri)
    kept = lance_format.dataset(uri).lance_schema.project(["c", "a"])
    ds = lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Project(kept, preserves_nullability=True),
                                          read_version=1)
    assert lance.dataset(uri).to_table().to_pydict() == {"c": [True, False], "a": [1, 2]} == ds.to_table().to_pydict()
    their_view = lance.dataset(uri).read_transaction(2).operation
    assert type(their_view).__name__ == "Project" and their_view.preserves_nullability
    assert ds.read_transaction(2).operation.preserves_nullability
    assert_same_history(uri)


def test_commit_batch_and_write_fragments_transaction_like_pylance(tmp_path):
    results = []
    for engine in ENGINES:
        uri = str(tmp_path / engine.__name__)
        created = engine.fragment.write_fragments(TABLE, uri, return_transaction=True, mode="create")
        assert type(created).__name__ == "Transaction" and type(created.operation).__name__ == "Overwrite"
        engine.LanceDataset.commit(uri, created)
        batch = [engine.fragment.write_fragments(TABLE.slice(i, 2), uri, return_transaction=True) for i in (0, 4)]
        out = engine.LanceDataset.commit_batch(uri, batch)
        results.append((out["dataset"].version, type(out["merged"].operation).__name__,
                        out["merged"].read_version, len(out["merged"].operation.fragments), _rows(out["dataset"])))
    assert results[0] == results[1]


def test_stale_read_version_conflicts_like_pylance(tmp_path):
    for engine in ENGINES:
        uri = str(tmp_path / engine.__name__)
        ds = engine.write_dataset(TABLE, uri)
        fragment = ds.get_fragment(0)
        first, second = fragment.delete("id = 1"), fragment.delete("id = 2")
        engine.LanceDataset.commit(uri, engine.LanceOperation.Delete([first], [], "id = 1"), read_version=1)
        with pytest.raises(OSError):  # pylance: CommitConflictError (an OSError), retryable
            engine.LanceDataset.commit(uri, engine.LanceOperation.Delete([second], [], "id = 2"), read_version=1)
        appended = engine.fragment.LanceFragment.create(uri, pa.table({"id": [50], "s": ["n"]}))
        assert engine.LanceDataset.commit(uri, engine.LanceOperation.Append([appended]), read_version=1).version == 3
    uri = str(tmp_path / "lance_format")
    stale = lance_format.dataset(uri, version=1).get_fragment(0).delete("id = 4")
    with pytest.raises(RetryableCommitConflictError):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Delete([stale], [], "id = 4"),
                                         read_version=1)
    assert isinstance(RetryableCommitConflictError("x"), CommitConflictError)
    assert lance_format.dataset(uri).version == lance.dataset(str(tmp_path / "lance")).version == 3


def test_failures_are_typed_like_pylance(tmp_path):
    uri = str(tmp_path / "t")
    lance_format.write_dataset(TABLE, uri)
    FragmentMetadata = lance_format.fragment.FragmentMetadata
    with pytest.raises(InvalidInputError):  # pylance: JSONDecodeError, a ValueError
        FragmentMetadata.from_json("{bad")
    with pytest.raises(InvalidInputError):
        FragmentMetadata.from_json("{}")
    with pytest.raises(InvalidInputError):
        FragmentMetadata.from_json(json.dumps({"id": 0, "files": [{"nope": 1}], "physical_rows": 1}))
    with pytest.raises(InvalidInputError):
        lance_format.fragment.DeletionFile(1, 1, "other", 1)
    with pytest.raises(SchemaMismatchError):  # pylance: OSError
        lance_format.fragment.LanceFragment.create(uri, pa.table({"q": [1.5]}))
    with pytest.raises(ArgumentTypeError):  # pylance: TypeError
        lance_format.LanceOperation.Append([1])
    assert issubclass(ArgumentTypeError, TypeError) and issubclass(ArgumentTypeError, ValueError)
    with pytest.raises(InvalidInputError, match="read_version is required"):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append([]))
    with pytest.raises(UnsupportedFeatureError):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Clone(True, None, 1, uri, None),
                                         read_version=1)
    with pytest.raises(ArgumentTypeError, match="lance Index values"):
        lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.CreateIndex(["x"], []), read_version=1)
    # a fragment whose data file is missing: committed as given (like pylance), refused on validate/read
    ghost = lance_format.fragment.LanceFragment.create(uri, TABLE)
    (tmp_path / "t" / "data" / ghost.files[0].path).unlink()
    ds = lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append([ghost]), read_version=1)
    with pytest.raises(CorruptFileError):
        ds.get_fragment(1).validate()
    with pytest.raises(OSError):
        ds.to_table()
    # a fragment that does not fit the schema (wrong row count for its file)
    wrong = lance_format.fragment.LanceFragment.create(uri, TABLE)
    wrong.physical_rows = 3
    ds = lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append([wrong]), read_version=2)
    with pytest.raises(CorruptFileError):
        ds.get_fragment(2).validate()


def test_import_as_lance_runs_pylance_snippets(tmp_path):
    """pylance's documented distributed-write examples, unchanged, with ``import lance_format as lance``."""
    import lance_format as lance  # noqa: F811 - that is the point

    uri = str(tmp_path / "example")
    tab1 = pa.table({"a": [1, 2], "b": ["a", "b"]})
    tab2 = pa.table({"a": [3, 4], "b": ["c", "d"]})
    fragment1 = lance.fragment.LanceFragment.create(uri, tab1)
    fragment2 = lance.fragment.LanceFragment.create(uri, tab2)
    operation = lance.LanceOperation.Overwrite(tab1.schema, [fragment1, fragment2])
    dataset = lance.LanceDataset.commit(uri, operation)
    assert dataset.to_table().to_pydict() == {"a": [1, 2, 3, 4], "b": ["a", "b", "c", "d"]}
    predicate = "a >= 2"
    updated_fragments, deleted_fragment_ids = [], []
    for fragment in dataset.get_fragments():
        new_fragment = fragment.delete(predicate)
        if new_fragment is not None:
            updated_fragments.append(new_fragment)
        else:
            deleted_fragment_ids.append(fragment.fragment_id)
    operation = lance.LanceOperation.Delete(updated_fragments, deleted_fragment_ids, predicate)
    dataset = lance.LanceDataset.commit(uri, operation, read_version=dataset.version)
    assert dataset.to_table().to_pydict() == {"a": [1], "b": ["a"]}

    def double_a(batch: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pc.multiply(batch["a"], 2)], ["a_doubled"])

    fragments = []
    for fragment in dataset.get_fragments():
        new_fragment, new_schema = fragment.merge_columns(double_a, columns=["a"])
        fragments.append(new_fragment)
    dataset = lance.LanceDataset.commit(uri, lance.LanceOperation.Merge(fragments, new_schema),
                                        read_version=dataset.version)
    assert dataset.to_table().to_pydict() == {"a": [1], "b": ["a"], "a_doubled": [2]}
    assert dataset.read_transaction(dataset.version).operation.schema.to_arrow().names == ["a", "b", "a_doubled"]
    assert_same_history(uri)


def _column_updates(engine: ModuleType, uri: str) -> list:
    lance.write_dataset(pa.table({"id": list(range(6)), "s": [f"v{i}" for i in range(6)],
                                  "n": [float(i) for i in range(6)]}), uri)
    lance.dataset(uri).delete("id = 1")
    fragment = engine.dataset(uri).get_fragment(0)
    new, modified = fragment.update_columns(pa.table({"id": [2, 3, 3, 9], "s": ["X", "Y", "Z", "Q"]}), left_on="id")
    shapes = [[(d.fields, d.column_indices) for d in new.files], modified]
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Update(updated_fragments=[new],
                                                                      fields_modified=modified), read_version=2)
    fragment = ds.get_fragment(0)
    by_row_id = pa.table({"_rowid": pa.array([0, 4], pa.uint64()), "n": [10.0, 40.0]})
    new, modified, offsets = fragment.update_columns(by_row_id, with_offsets=True)
    shapes += [[(d.fields, d.column_indices) for d in new.files], modified, offsets]
    ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Update(updated_fragments=[new],
                                                                      fields_modified=modified), read_version=3)
    fragment = ds.get_fragment(0)
    shapes += [fragment.delete_rows([0, 2]).num_deletions, fragment.delete_rows(range(6))]
    with pytest.raises(ValueError):
        fragment.update_columns(pa.table({"id": [2], "zz": ["X"]}), left_on="id")
    with pytest.raises(ValueError):
        fragment.update_columns(pa.table({"id": [2], "s": ["X"]}), left_on="nope")
    return shapes + [ds.to_table().to_pydict()]


def test_update_columns_and_delete_rows_like_pylance(tmp_path):
    ours = _column_updates(lance_format, str(tmp_path / "ours"))
    assert ours == _column_updates(lance, str(tmp_path / "theirs"))
    assert ours[-1] == {"id": [0, 2, 3, 4, 5], "s": ["v0", "X", "Z", "v4", "v5"], "n": [10.0, 2.0, 3.0, 40.0, 5.0]}
    assert_same_history(str(tmp_path / "ours"))


def test_data_replacement_like_pylance(tmp_path):
    import shutil

    for engine in ENGINES:
        uri, side = str(tmp_path / engine.__name__), str(tmp_path / f"side_{engine.__name__}")
        lance.write_dataset(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), uri)
        written = engine.fragment.LanceFragment.create(side, pa.table({"a": [10, 20, 30]}), mode="create")
        name = written.files[0].path
        shutil.copy(f"{side}/data/{name}", f"{uri}/data/{name}")
        old = engine.dataset(uri).get_fragment(0).data_files()[0]
        new_file = engine.fragment.DataFile(name, [0], [0], old.file_major_version, old.file_minor_version)
        group = engine.LanceOperation.DataReplacementGroup(0, new_file)
        engine.LanceDataset.commit(uri, engine.LanceOperation.DataReplacement([group]), read_version=1)
        assert lance.dataset(uri).to_table().to_pydict() == {"a": [10, 20, 30], "b": ["x", "y", "z"]}
        assert lance_format.dataset(uri).to_table().to_pydict() == {"a": [10, 20, 30], "b": ["x", "y", "z"]}
        assert [(d.fields, d.column_indices) for d in lance.dataset(uri).get_fragment(0).data_files()] == [
            ([-2, 1], [0, 1]), ([0], [0])]
        assert type(lance_format.dataset(uri).read_transaction(2).operation).__name__ == "DataReplacement"
    assert_same_history(str(tmp_path / "lance_format"))


def test_spark_tasks_report_fragments_pylance_can_commit(tmp_path):
    """The Spark write tasks report pylance's FragmentMetadata JSON: a pylance driver commits them as is."""
    from lance_format.schema import LanceSchema
    from lance_format.spark.tasks import WriteSpec, schema_to_bytes, write_task

    uri = str(tmp_path / "t")
    spec = WriteSpec(uri=uri, write_id="0123456789abcdef0123456789abcdef",
                     schema=schema_to_bytes(LanceSchema.from_arrow(TABLE.schema)), storage_version="2.2",
                     max_rows_per_file=4, max_bytes_per_file=1 << 30)
    reported = [row for batch in write_task(spec)(iter(TABLE.to_batches())) for row in batch.to_pylist()]
    assert [r["num_rows"] for r in reported] == [4, 4, 2]
    fragments = [lance.fragment.FragmentMetadata.from_json(r["fragment"]) for r in reported]
    lance.LanceDataset.commit(uri, lance.LanceOperation.Overwrite(TABLE.schema, fragments))
    assert lance.dataset(uri).to_table().equals(TABLE)
    assert lance_format.dataset(uri).to_table().equals(TABLE)


def _fragment_merges(engine: ModuleType, uri: str) -> list:
    ds = engine.write_dataset(TABLE, uri, max_rows_per_file=4)
    steps = []
    system = {"_rowid": {"with_row_id": True}, "_rowaddr": {"with_row_address": True}}
    for key, column in (("_rowid", "b"), ("_rowaddr", "c"), ("id", "d")):
        merged, schema = [], None
        for fragment in ds.get_fragments():
            if key == "id":  # join on a column: only some rows match, the others get nulls
                table = fragment.to_table(columns=["id"], filter="id % 2 = 0")
                table = table.append_column(column, pc.multiply(table["id"], 10))
            else:
                table = fragment.scanner(columns=[], **system[key]).to_table()
                table = table.append_column(column, pa.array(range(table.num_rows), pa.int64()))
            new, schema = fragment.merge(table, key)
            merged.append(new)
        ds = engine.LanceDataset.commit(uri, engine.LanceOperation.Merge(merged, schema), read_version=ds.version)
        steps.append([(d.fields, d.column_indices) for f in merged for d in f.files])
    return steps + [ds.to_table().to_pydict()]


def test_fragment_merge_like_pylance(tmp_path):
    ours = _fragment_merges(lance_format, str(tmp_path / "ours"))
    assert ours == _fragment_merges(lance, str(tmp_path / "theirs"))
    assert ours[-1]["d"] == [0, None, 20, None, 40, None, 60, None, 80, None]
    assert_same_history(str(tmp_path / "ours"))


class _Progress(lance.progress.FragmentWriteProgress):
    """Counts the hooks of pylance's FragmentWriteProgress (both engines call them)."""

    def __init__(self) -> None:
        self.begun: list[int] = []
        self.completed: list[int] = []

    def begin(self, fragment, **kwargs) -> None:
        self.begun.append(fragment.id)

    def complete(self, fragment, **kwargs) -> None:
        self.completed.append(fragment.physical_rows)


def _writer_options(engine: ModuleType, uri: str) -> list:
    big = pa.record_batch([pa.array(["0" * 1024] * 1024 * 8)], names=["a"])  # 8 MiB: over pylance's page cache
    progress = _Progress()
    rolled = engine.fragment.write_fragments(pa.RecordBatchReader.from_batches(big.schema, [big, big]), uri,
                                             max_bytes_per_file=1024, progress=progress)
    numbered = engine.fragment.LanceFragment.create(uri + "_2", pa.table({"a": ["x"]}), fragment_id=5)
    # a table with a hole in its field ids: new fragments use the table's ids
    holes = uri + "_holes"
    ds = engine.write_dataset(pa.table({"a": range(3)}), holes)
    ds.add_columns({"b": "a + 1"})
    ds.add_columns({"c": "a + 2"})
    ds.drop_columns(["b"])
    created = engine.fragment.LanceFragment.create(holes, pa.table({"a": range(3, 6), "c": range(5, 8)}))
    written = engine.fragment.write_fragments(pa.table({"a": range(6, 9), "c": range(8, 11)}), holes)
    ds = engine.LanceDataset.commit(holes, engine.LanceOperation.Append([created, *written]),
                                    read_version=engine.dataset(holes).version)
    return [len(rolled), [f.physical_rows for f in rolled], len(progress.begun), progress.completed, numbered.id,
            [i for f in [created, *written] for d in f.files for i in d.fields], ds.to_table().to_pydict()]


def test_writer_options_like_pylance(tmp_path):
    ours = _writer_options(lance_format, str(tmp_path / "ours"))
    assert ours == _writer_options(lance, str(tmp_path / "theirs"))
    assert ours[0] == 2 and ours[4] == 5
    assert ours[-1] == {"a": list(range(9)), "c": list(range(2, 11))}


def test_no_retries_and_empty_data_like_pylance(tmp_path):
    for engine in ENGINES:
        uri = str(tmp_path / engine.__name__)
        created = engine.fragment.LanceFragment.create(uri, TABLE)
        overwrite = engine.LanceOperation.Overwrite(TABLE.schema, [created])
        engine.LanceDataset.commit(uri, overwrite, max_retries=0)
        engine.LanceDataset.commit(uri, overwrite, read_version=1, max_retries=0)
        with pytest.raises(OSError, match="Commit conflict for version 2"):  # version 2 exists: no retry allowed
            engine.LanceDataset.commit(uri, overwrite, read_version=1, max_retries=0)
        with pytest.raises(OSError, match="[Rr]etry"):  # over a concurrent Overwrite: retryable, as in pylance
            engine.LanceDataset.commit(uri, overwrite, read_version=1)
        with pytest.raises(OSError, match="[Ii]ncompatible"):  # an Append over a concurrent Overwrite
            engine.LanceDataset.commit(uri, engine.LanceOperation.Append([created]), read_version=1)
        assert engine.LanceDataset.commit(uri, overwrite, read_version=2).version == 3
        with pytest.raises(OSError, match="empty schema"):
            engine.fragment.LanceFragment.create(uri + "_e", pa.table({}))
        with pytest.raises(OSError, match="Input data was empty"):
            engine.fragment.LanceFragment.create(uri + "_e", TABLE.slice(0, 0))
    with pytest.raises(CommitConflictError):
        lance_format.LanceDataset.commit(str(tmp_path / "lance_format"), lance_format.LanceOperation.Restore(1),
                                         read_version=2, max_retries=0)
    with pytest.raises(RetryableCommitConflictError):
        lance_format.LanceDataset.commit(str(tmp_path / "lance_format"), lance_format.LanceOperation.Overwrite(
            TABLE.schema, [lance_format.fragment.LanceFragment.create(str(tmp_path / "lance_format"), TABLE)]),
            read_version=1)


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_fragments_of_files_written_elsewhere_like_pylance(tmp_path, version):
    from lance.file import LanceFileWriter

    nested = pa.table({"a": range(50), "st": [{"x": i, "y": str(i)} for i in range(50)]})
    flat = pa.table({"a": range(50), "s": [str(i) for i in range(50)]})
    results = []
    for engine in ENGINES:
        for name, data in (("nested", nested), ("flat", flat)):
            uri = tmp_path / engine.__name__ / name
            ds = engine.write_dataset(data.slice(0, 0), str(uri), data_storage_version=version)
            with LanceFileWriter(str(uri / "data" / "outside.lance"), version=version) as writer:
                writer.write_batch(data)
            described = engine.fragment.DataFile.create(ds, "outside.lance")
            results.append((described.fields, described.column_indices, described.file_major_version,
                            described.file_minor_version, described.file_size_bytes))
        # (pylance's create_from_file miscounts the columns of nested 2.1 files: flat ones only)
        fragment = engine.fragment.LanceFragment.create_from_file("outside.lance", ds, 0)
        ds = engine.LanceDataset.commit(str(uri), engine.LanceOperation.Append([fragment]), read_version=ds.version)
        results.append((fragment.physical_rows, ds.to_table().to_pydict()))
    assert results[:3] == results[3:]
    assert lance.dataset(str(tmp_path / "lance_format" / "flat")).to_table().equals(flat)


def test_merge_with_a_pyarrow_schema_over_dropped_columns_like_pylance(tmp_path):
    tables = []
    for engine in ENGINES:
        uri = str(tmp_path / engine.__name__)
        ds = engine.write_dataset(pa.table({"a": range(5)}), uri)
        ds.add_columns({"b": "a + 1"})
        ds.drop_columns(["b"])  # b's data (field 1) stays on disk: new fields start above it
        new, _schema = ds.get_fragment(0).merge_columns({"c": "a * 3"})
        with pytest.deprecated_call():
            merge = engine.LanceOperation.Merge([new], pa.schema([pa.field("a", pa.int64()), pa.field("c", pa.int64())]))
        ds = engine.LanceDataset.commit(uri, merge, read_version=ds.version)
        tables.append(ds.to_table().to_pydict())
    assert tables[0] == tables[1] == {"a": list(range(5)), "c": [0, 3, 6, 9, 12]}


def test_pickled_fragment_keeps_its_dataset_and_options(tmp_path):
    """A fragment pickles without reopening its dataset, and the copy's ``_ds`` has the storage
    options it was opened with (pylance's attributes)."""
    options = {"allow_http": "true"}
    uri = str(tmp_path / "t")
    for engine in ENGINES:
        engine.write_dataset(TABLE, uri, mode="overwrite", storage_options=options)
        fragment = engine.dataset(uri, storage_options=options).get_fragments()[0]
        copy = pickle.loads(pickle.dumps(fragment))
        assert copy._ds._storage_options == options
        assert copy.to_table().equals(fragment.to_table())


def test_update_columns_of_a_json_column_like_pylance(tmp_path):
    """New ``arrow.json`` values for a JSON column are stored as JSONB, as the table holds them."""
    table = pa.table({"id": pa.array([1, 2, 3, 4, 5]), "email": [f"u{i}@example.com" for i in range(5)],
                      "meta": pa.array(['{"plan":"free"}', None, '{"plan":"pro","seats":3}', '{"x":4}', '{}'],
                                       pa.json_())})
    updates = pa.table({"_rowid": pa.array([1, 3], pa.uint64()),
                        "meta": pa.array(['{"updated":true,"id":2}', None], pa.json_())})
    results = []
    for engine in ENGINES:
        uri = str(tmp_path / engine.__name__)
        ds = engine.write_dataset(table, uri)
        fragment, modified = ds.get_fragment(0).update_columns(updates)
        op = engine.LanceOperation.Update(updated_fragments=[fragment], fields_modified=modified)
        engine.LanceDataset.commit(uri, op, read_version=ds.version)
        results.append(lance.dataset(uri).to_table())
    assert results[0].equals(results[1])
    assert [json.loads(v) if v else v for v in results[1].column("meta").to_pylist()] == [
        {"plan": "free"}, {"updated": True, "id": 2}, {"plan": "pro", "seats": 3}, None, {}]
