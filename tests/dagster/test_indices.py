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
    assert {e["action"] for e in meta[INDICES].value} <= {"optimized", "rebuilt"}
    for name in names:
        assert lance.dataset(uri).stats.index_stats(name)["num_unindexed_rows"] == 0
