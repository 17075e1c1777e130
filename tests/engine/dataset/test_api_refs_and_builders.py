"""``Tags``, ``Branches``, ``SqlQueryBuilder`` and ``DatasetDelta`` with pylance 14's signatures,
call for call: the same parameter names (``tag``, ``reference``, ``builder``, ``delta``), tag
references as pylance takes them, ``Tags.replace_metadata`` (tag files either engine reads),
and ``SqlQueryBuilder.batch_size_bytes`` / ``blob_handling``."""

from __future__ import annotations

import inspect
import sys

import lance
import pyarrow as pa
import pytest

import lance_format

THEIRS = sys.modules["lance.dataset"]  # `lance.dataset` is also a function
OURS = sys.modules["lance_format.dataset"]
ENGINES = {"ours": lance_format, "pylance": lance}


def _parameters(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if p.kind != p.KEYWORD_ONLY]


@pytest.mark.parametrize("name", ["Tags", "Branches", "SqlQueryBuilder", "DatasetDelta"])
def test_same_constructor_and_method_parameters(name):
    theirs, ours = getattr(THEIRS, name), getattr(OURS, name)
    methods = [m for m in vars(theirs) if not m.startswith("_") and callable(vars(theirs)[m])]
    assert [m for m in methods if not hasattr(ours, m)] == []
    for method in ["__init__", *methods]:
        assert [n for n, _ in _parameters(getattr(ours, method))] == [n for n, _ in _parameters(getattr(theirs, method))]
        assert _parameters(getattr(ours, method)) == _parameters(getattr(theirs, method))


def _table(tmp_path, engine) -> object:
    ds = engine.write_dataset(pa.table({"a": [1, 2]}), str(tmp_path / engine.__name__))
    ds.insert(pa.table({"a": [3]}))
    ds.insert(pa.table({"a": [4]}))
    return ds


def _plain(tags: dict) -> dict:
    # manifest sizes are each engine's own
    return {name: {k: v for k, v in info.items() if k not in ("created_at", "updated_at", "manifest_size")}
            for name, info in tags.items()}


def test_tag_references_by_keyword_like_pylance(tmp_path):
    results = {}
    for name, engine in ENGINES.items():
        ds = _table(tmp_path, engine)
        ds.tags.create(tag="by-version", reference=1)
        ds.tags.create(tag="by-tag", reference="by-version")
        ds.tags.create(tag="latest")
        ds.tags.create(tag="by-branch", reference=("main", 2))
        ds.tags.update(tag="by-version", reference=2)
        ds.create_branch("dev", 3).insert(pa.table({"a": [5]}))
        ds.tags.create("on-dev", ("dev", None))
        got = [ds.tags.get_version(tag="latest"), ds.tags.get_version("by-tag")]
        ds.tags.delete(tag="by-tag")
        results[name] = (_plain(ds.tags.list()), [n for n, _ in ds.tags.list_ordered(order="asc")], got)
    assert results["ours"] == results["pylance"]
    assert results["ours"][0]["on-dev"]["branch"] == "dev" and results["ours"][2] == [3, 1]


def test_replace_tag_metadata_crosses_engines(tmp_path):
    for writer, reader in [(lance_format, lance), (lance, lance_format)]:
        ds = _table(tmp_path / writer.__name__, writer)
        ds.tags.create("v1", 1)
        before = reader.dataset(ds.uri).tags.list()["v1"]
        ds.tags.replace_metadata("v1", {"owner": "sales", "tier": "gold"})
        ds.tags.replace_metadata(tag="v1", metadata={"owner": "ops"})  # the whole map is replaced
        after = reader.dataset(ds.uri).tags.list()["v1"]
        assert after["metadata"] == {"owner": "ops"}
        # neither the version nor the update time changes
        assert (after["version"], after["updated_at"], after["created_at"]) == \
            (before["version"], before["updated_at"], before["created_at"])
        reader.dataset(ds.uri).tags.replace_metadata("v1", {})
        assert writer.dataset(ds.uri).tags.list()["v1"]["metadata"] == {}


@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_replace_tag_metadata_errors(tmp_path, engine):
    ds = _table(tmp_path, engine)
    ds.tags.create("v1", 1)
    with pytest.raises(ValueError, match="not"):
        ds.tags.replace_metadata("missing", {"k": "v"})
    with pytest.raises(TypeError):
        ds.tags.replace_metadata("v1", {"k": 1})
    assert ds.tags.list()["v1"]["metadata"] == {}


@pytest.mark.parametrize("engine", ENGINES.values(), ids=ENGINES.keys())
def test_tags_and_branches_of_a_dataset_object(tmp_path, engine):
    ds = _table(tmp_path, engine)
    ds.create_branch("dev", 2)
    ds.tags.create("t", 3)
    module = OURS if engine is lance_format else THEIRS
    handle = ds if engine is lance_format else ds._ds  # pylance's take its core's dataset
    assert module.Branches(handle).list() == ds.branches.list()
    assert module.Tags(handle).list() == ds.tags.list()
    # a version number is one of the branch of the dataset the tags came from
    branch = ds.create_branch("dev2", 2)
    branch.insert(pa.table({"a": [9]}))
    module.Tags(branch if engine is lance_format else branch._ds).create("dev-3", 3)
    assert ds.tags.list()["dev-3"]["branch"] == "dev2"


def test_sql_builder_batch_size_bytes_and_blob_handling(tmp_path):
    results = {}
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": list(range(100)), "s": [f"s{i}" for i in range(100)]}),
                                  str(tmp_path / name))
        query = (ds.sql("SELECT a, s FROM dataset WHERE a >= 10").batch_size(30).batch_size_bytes(1 << 20)
                 .blob_handling("blobs_descriptions").build())
        batches = query.to_batch_records()
        results[name] = (pa.Table.from_batches(batches).sort_by("a"), max(b.num_rows for b in batches) <= 30)
    assert results["ours"] == results["pylance"] and results["ours"][1]


def test_delta_made_by_the_dataset_like_pylance(tmp_path):
    results = {}
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"a": [1, 2]}), str(tmp_path / name), enable_stable_row_ids=True)
        ds.insert(pa.table({"a": [3]}))
        delta = ds.delta(1)
        assert type(delta).__name__ == "DatasetDelta"
        results[name] = (delta.get_inserted_rows().read_all().column("a").to_pylist(),
                         len(delta.list_transactions()))
    assert results["ours"] == results["pylance"] == ([3], 1)


def test_merge_insert_builder_made_directly_defaults_to_the_primary_key(tmp_path):
    key = {"lance-schema:unenforced-primary-key": "true"}
    schema = pa.schema([pa.field("id", pa.int64(), False, metadata=key), pa.field("v", pa.string())])
    results = {}
    for name, engine in ENGINES.items():
        ds = engine.write_dataset(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema), str(tmp_path / name))
        module = OURS if engine is lance_format else THEIRS
        builder = module.MergeInsertBuilder(ds if engine is lance_format else ds._ds)  # no `on`
        builder.when_matched_update_all().when_not_matched_insert_all().execute(
            pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=schema))
        results[name] = engine.dataset(str(tmp_path / name)).to_table().sort_by("id").to_pydict()
        plain = engine.write_dataset(pa.table({"id": [1]}), str(tmp_path / f"{name}-plain"))
        with pytest.raises(ValueError, match="requires join keys"):
            module.MergeInsertBuilder(plain if engine is lance_format else plain._ds, None)
    assert results["ours"] == results["pylance"] == {"id": [1, 2, 3], "v": ["a", "B", "c"]}
