"""Index specs on assets: the IO manager builds and refreshes declared scalar indices after each
write (append, merge, overwrite, partitions, write-audit-publish), reports them as metadata, and
the tables answer indexed queries in pylance exactly as in this engine."""

from __future__ import annotations

import dagster as dg
import lance
import pyarrow as pa
import pytest

import lance_format
from lance_assets import LanceIOManager, lance_asset
from lance_assets.indices import INDICES

SPECS = [
    {"column": "id", "type": "BTREE"},
    {"column": "category", "type": "BITMAP", "name": "category_bitmap"},
    {"column": "tags", "type": "LABEL_LIST"},
    {"column": "email", "type": "NGRAM"},
]
CATEGORIES = ["books"] * 6 + ["garden"] * 2 + ["toys", None]  # skewed, with nulls


def rows(start: int, count: int, *, version: int = 0) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "category": [CATEGORIES[i % len(CATEGORIES)] for i in ids],
        "tags": [["sale", "new"] if i % 3 == 0 else (["new"] if i % 3 == 1 else None) for i in ids],
        "email": [f"user{i}@example{i % 4}.com" if i % 11 else None for i in ids],
        "url": [f"https://shop.example.com/p/{i}?v={version}" for i in ids],
        "price": pa.array([float(i % 97) + version for i in ids]),
    })


def materialize(asset, instance, root, *, metadata_io=None, partition_key=None, **io_kwargs):
    result = dg.materialize([asset], instance=instance, partition_key=partition_key,
                            resources={"io_manager": LanceIOManager(base_uri=root, **io_kwargs)})
    assert result.success
    return result.asset_materializations_for_node(asset.op.name)[-1].metadata


def stats(uri: str, name: str) -> dict:
    return lance_format.dataset(uri).stats.index_stats(name)


def make_asset(write_mode: str, specs=SPECS, **extra_meta):
    state = {"batch": rows(0, 40)}

    @lance_asset(name="products", metadata={INDICES: specs, "lance/write_mode": write_mode,
                                             "lance/merge_on": "id", **extra_meta})
    def products() -> pa.Table:
        return state["batch"]

    return products, state


def test_indices_built_then_refreshed_by_append(instance, root):
    asset, state = make_asset("append")
    meta = materialize(asset, instance, root)
    uri = f"{root}/products.lance"
    names = {d.name: d.index_type for d in lance_format.dataset(uri).describe_indices()}
    assert names == {"id_idx": "BTree", "category_bitmap": "Bitmap", "tags_idx": "LabelList", "email_idx": "NGram"}
    assert meta["lance/index/id_idx/type"].value == "BTree"
    assert meta["lance/index/id_idx/indexed_rows"].value == 40
    assert meta["lance/index/id_idx/unindexed_rows"].value == 0
    assert {e["name"]: e["action"] for e in meta[INDICES].value} == dict.fromkeys(names, "created")
    assert all(e["build_seconds"] >= 0 for e in meta[INDICES].value)

    state["batch"] = rows(40, 25)
    meta = materialize(asset, instance, root)
    assert meta["lance/index/category_bitmap/indexed_rows"].value == 65
    assert meta["lance/index/category_bitmap/unindexed_rows"].value == 0
    assert {e["action"] for e in meta[INDICES].value} == {"optimized"}  # extended, not rebuilt
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_indexed_rows"] == 65
    for name in names:
        assert lance.dataset(uri).stats.index_stats(name)["num_unindexed_rows"] == 0


QUERIES = [
    "id >= 10 AND id < 30", "id IN (1, 44, 70, 999)", "category = 'garden'", "category IS NULL",
    "array_has_any(tags, ['sale'])", "email LIKE '%example2%'", "category = 'toys' AND id > 50",
]


def assert_pylance_agrees(uri: str) -> None:
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert {d.name: d.index_type for d in ours.describe_indices()} == {
        d.name: d.index_type for d in theirs.describe_indices()}
    for d in theirs.describe_indices():
        mine = ours.stats.index_stats(d.name)
        official = theirs.stats.index_stats(d.name)
        assert (mine["num_indexed_rows"], mine["num_unindexed_rows"]) == (
            official["num_indexed_rows"], official["num_unindexed_rows"])
    for query in QUERIES:
        expected = theirs.to_table(filter=query).sort_by("id")
        assert ours.to_table(filter=query).sort_by("id").equals(expected), query
        assert ours.to_table(filter=query, use_scalar_index=False).sort_by("id").equals(expected), query
        assert "ScalarIndexQuery" in theirs.scanner(filter=query).explain_plan() or "id IN" in query or (
            "AND" in query), query


def test_merges_appends_overwrite_and_maintenance_answer_as_pylance(instance, root):
    from lance_assets import LanceMaintenancePolicy
    asset, state = make_asset("merge")
    maintenance = {"maintenance_min_small_fragments": 2, "maintenance_target_rows_per_fragment": 1000}
    uri = f"{root}/products.lance"
    materialize(asset, instance, root)
    for run in range(1, 4):  # each merge updates 10 rows and inserts 15
        state["batch"] = pa.concat_tables([rows(run * 10, 10, version=run), rows(40 + 15 * (run - 1), 15, version=run)])
        meta = materialize(asset, instance, root, **(maintenance if run == 3 else {}))
        assert all(e["unindexed_rows"] == 0 for e in meta[INDICES].value)
        assert_pylance_agrees(uri)
    assert lance_format.dataset(uri).count_rows() == 85
    assert "lance/maintenance/unindexed_rows_after" in meta
    assert meta["lance/maintenance/unindexed_rows_after"].value == 0
    # an append written by someone else, then the maintenance policy alone brings indices up to date
    lance_format.write_dataset(rows(500, 7), uri, mode="append")
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_unindexed_rows"] == 7
    from lance_assets import maintain_table
    out = maintain_table(uri, LanceMaintenancePolicy(min_small_fragments=100, cleanup_older_than=None))
    assert out["lance/maintenance/unindexed_rows_before"].value == 7 * 4
    assert out["lance/maintenance/unindexed_rows_after"].value == 0
    assert "id_idx" in out["lance/maintenance/indices_optimized"].value
    assert_pylance_agrees(uri)
    # an overwrite drops and rebuilds every index over the new rows only
    asset2, state2 = make_asset("overwrite")
    state2["batch"] = rows(1000, 30)
    meta = materialize(asset2, instance, root)
    assert {e["action"] for e in meta[INDICES].value} == {"created"}
    assert meta["lance/index/id_idx/indexed_rows"].value == 30
    assert_pylance_agrees(uri)


def test_io_manager_config_declares_indices(instance, root):
    @lance_asset(name="events")
    def events() -> pa.Table:
        return rows(0, 20)

    meta = materialize(events, instance, root,
                       indices={"events": [{"column": "category", "type": "BITMAP"},
                                           {"column": "price", "type": "ZONEMAP", "params": {}}]})
    assert meta["lance/index/category_idx/type"].value == "Bitmap"
    assert meta["lance/index/price_idx/type"].value == "ZoneMap"
    assert lance.dataset(f"{root}/events.lance").describe_indices()[0].num_rows_indexed == 20


@pytest.mark.parametrize("spec, words", [
    ({"column": "no_such_column", "type": "BTREE"}, ["no_such_column", "no_such_column_idx"]),
    ({"column": "category", "type": "LABEL_LIST", "name": "cat_labels"}, ["cat_labels", "LABEL_LIST", "category"]),
    ({"column": "id", "type": "NOT_AN_INDEX"}, ["id_idx", "NOT_AN_INDEX"]),
])
def test_bad_index_specs_fail_naming_asset_and_index(instance, root, spec, words):
    asset, _ = make_asset("append", specs=[spec])
    result = dg.materialize([asset], instance=instance, raise_on_error=False,
                            resources={"io_manager": LanceIOManager(base_uri=root)})
    assert not result.success
    message = str(result.failure_data_for_node("products").error)
    for word in ["asset products", *words]:
        assert word in message, message


def test_malformed_specs_are_refused(instance, root):
    asset, _ = make_asset("append", specs=[{"col": "id", "type": "BTREE"}])
    result = dg.materialize([asset], instance=instance, raise_on_error=False,
                            resources={"io_manager": LanceIOManager(base_uri=root)})
    assert not result.success
    assert "needs a 'column' and a 'type'" in str(result.failure_data_for_node("products").error)


def test_partitions_share_one_index_per_table(instance, root):
    parts = dg.StaticPartitionsDefinition(["books", "garden", "toys"])

    @lance_asset(name="by_category", partitions_def=parts,
                 metadata={INDICES: [{"column": "id", "type": "BTREE"}], "partition_expr": "category"})
    def by_category(context) -> pa.Table:
        table = rows(0, 60)
        return table.filter(pa.compute.equal(table["category"], context.partition_key))

    for key in ["books", "garden", "toys", "garden"]:
        meta = materialize(by_category, instance, root, partition_key=key)
        assert meta["lance/index/id_idx/unindexed_rows"].value == 0
    uri = f"{root}/by_category.lance"
    assert [d.name for d in lance.dataset(uri).describe_indices()] == ["id_idx"]
    assert lance.dataset(uri).stats.index_stats("id_idx")["num_indexed_rows"] == lance.dataset(uri).count_rows()
    assert lance.dataset(uri).to_table(filter="id = 6")["category"].to_pylist() == ["garden"]
    assert_pylance_agrees_simple(uri)


def assert_pylance_agrees_simple(uri):
    for query in ["id < 20", "id IN (3, 6, 9)"]:
        assert lance_format.dataset(uri).to_table(filter=query).sort_by("id").equals(
            lance.dataset(uri).to_table(filter=query).sort_by("id"))
