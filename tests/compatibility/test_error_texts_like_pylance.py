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


def test_missing_tags_and_versions(engine, tmp_path):
    uri = str(tmp_path / "t")
    ds = engine.write_dataset(ROWS, uri)
    ds = engine.write_dataset(ROWS, uri, mode="append")
    ds.tags.create("release-1", 1)
    with pytest.raises(OSError, match="Ref not found error: tag gone does not exist"):
        ds.checkout_version("gone")
    for call in (lambda: engine.dataset(uri, "gone"), lambda: ds.tags.update("gone", 1),
                 lambda: ds.tags.delete("gone"), lambda: ds.tags.get_version("gone")):
        with pytest.raises(ValueError, match="tag gone does not exist"):
            call()
    with pytest.raises(ValueError, match="Version not found error: version main:7 does not exist"):
        ds.tags.update("release-1", 7)
    assert ds.tags.get_version("release-1") == 1


def test_cleanup_refuses_tagged_versions(engine, tmp_path):
    from datetime import timedelta

    uri = str(tmp_path / "t")
    ds = engine.write_dataset(ROWS, uri)
    engine.write_dataset(ROWS, uri, mode="overwrite")
    ds = engine.write_dataset(ROWS, uri, mode="overwrite")
    ds.tags.create("audit", 1)
    with pytest.raises(OSError, match="tagged version"):
        ds.cleanup_old_versions(older_than=timedelta(0), error_if_tagged_old_versions=True)
    assert len(engine.dataset(uri).versions()) == 3


@pytest.mark.parametrize("storage", ["legacy", "stable", "2.1"])
@pytest.mark.parametrize("where", ["top", "in_struct", "in_list"])
def test_zero_dimension_fixed_size_lists_are_refused(engine, tmp_path, storage, where):
    empty = pa.list_(pa.float32(), 0)
    column = {"top": pa.array([[], None], empty),
              "in_struct": pa.array([{"vec": []}, None], pa.struct([pa.field("vec", empty)])),
              "in_list": pa.array([[[]], []], pa.list_(empty))}[where]
    name = {"top": "v", "in_struct": "vec", "in_list": "item"}[where]
    table = pa.table({"id": [1, 2], "v": column})
    with pytest.raises(OSError, match=f'Field "{name}" contains a FixedSizeList with dimension 0; dimension must be '
                                      "a positive integer"):
        engine.write_dataset(table, str(tmp_path / "t"), data_storage_version=storage)
    assert not (tmp_path / "t" / "_versions").exists()


NESTED = {
    "struct_child": (pa.struct([pa.field("x", pa.string(), nullable=False)]), True,
                     [None, {"x": "a@example.com"}], [{"x": None}]),
    "required_struct": (pa.struct([pa.field("x", pa.string())]), False, [{"x": None}], [None]),
    "list_item": (pa.list_(pa.field("item", pa.string(), nullable=False)), True, [None, [], ["u"]], [["u", None]]),
}


@pytest.mark.parametrize("case", sorted(NESTED))
def test_nested_nulls_in_non_null_fields(engine, tmp_path, case):
    kind, nullable, good, bad = NESTED[case]
    schema = pa.schema([pa.field("v", kind, nullable=nullable)])
    uri = str(tmp_path / "t")
    engine.write_dataset([], uri, schema=schema, data_storage_version="legacy")
    engine.write_dataset(pa.table({"v": pa.array(good, kind)}, schema=schema), uri, mode="append")
    with pytest.raises(OSError, match="contain(ed|s) null values"):
        engine.write_dataset(pa.table({"v": pa.array(bad, kind)}, schema=schema), uri, mode="append")
    if engine is lance:
        return  # pylance refuses a slice whose list items outside it hold a null
    # a slice of a larger array: only the rows in the slice count
    sliced = pa.array(bad + good, kind).slice(len(bad))
    engine.write_dataset(pa.table({"v": sliced}, schema=schema), uri, mode="append")
    assert engine.dataset(uri).count_rows() == 2 * len(good)


def test_commit_timeout_checks(engine, tmp_path):
    from datetime import timedelta

    uri = str(tmp_path / "t")
    ds = engine.write_dataset(ROWS, uri)
    fragment = engine.fragment.LanceFragment.create(uri, ROWS)
    append = engine.LanceOperation.Append([fragment])
    with pytest.raises(OSError, match="non-zero"):
        engine.LanceDataset.commit(ds, append, read_version=1, commit_timeout=timedelta(0))
    with pytest.raises(ValueError, match="negative timedelta"):
        engine.LanceDataset.commit(ds, append, read_version=1, commit_timeout=timedelta(seconds=-1))
    with pytest.raises(TypeError, match="timedelta"):
        engine.LanceDataset.commit(ds, append, read_version=1, commit_timeout=5)
    assert engine.dataset(uri).version == 1
    assert engine.LanceDataset.commit(ds, append, read_version=1, commit_timeout=timedelta(minutes=1)).version == 2
    assert engine.LanceDataset.commit(uri, append, read_version=2, commit_timeout=None).count_rows() == 9


@pytest.mark.parametrize("new, message", [
    (pa.field("visits", pa.float32()), r"Type conflicts between visits\(Int64\) and visits\(Float32\)"),
    ([pa.field("score", pa.int32()), pa.field("email", pa.large_string())],
     r"Type conflicts between email\(Utf8\) and email\(LargeUtf8\)"),
    (pa.field("visits", pa.uint16()), r"Type conflicts between visits\(Int64\) and visits\(UInt16\)"),
    (pa.field("visits", pa.int64()), "Column visits already exists in the dataset"),
])
def test_add_columns_name_conflicts(engine, tmp_path, new, message):
    uri = str(tmp_path / "t")
    ds = engine.write_dataset(ROWS, uri)
    with pytest.raises(OSError if "Type" in message else Exception, match=message):
        ds.add_columns(new)
    assert engine.dataset(uri).schema == ROWS.schema
