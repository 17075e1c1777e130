"""Typical pylance user code, run unchanged with ``import lance_format as lance``.

Each snippet is plain pylance code (from pylance's documentation and everyday notebooks). It
runs once with ``lance`` bound to pylance and once bound to ``lance_format``, each in a fresh
directory; the values it returns must be equal. Nothing in a snippet knows which engine runs it.
"""

from __future__ import annotations

import textwrap

import lance as pylance
import pytest

import lance_format

SNIPPETS = {
    "pandas round trip": """
        import pandas as pd
        df = pd.DataFrame({"id": [1, 2, 3], "name": ["ann", "bob", "cy"], "score": [0.5, None, 2.0]})
        ds = lance.write_dataset(df, "people.lance")
        out = lance.dataset("people.lance").to_table().to_pandas().fillna(-1)
        result = (out.to_dict("list"), ds.count_rows(), ds.version)
    """,
    "filter, columns, limit": """
        import pyarrow as pa
        tbl = pa.table({"x": range(100), "cat": ["a", "b", "c", "d"] * 25})
        lance.write_dataset(tbl, "t.lance", max_rows_per_file=30)
        ds = lance.dataset("t.lance")
        result = (ds.to_table(columns=["x"], filter="cat = 'b' AND x > 40", limit=5).to_pydict(),
                  ds.count_rows("x < 10"), len(ds.get_fragments()), ds.head(3).to_pydict(),
                  ds.take([5, 1, 99]).to_pydict())
    """,
    "versions, time travel and tags": """
        import pyarrow as pa
        lance.write_dataset(pa.table({"a": [1, 2]}), "v.lance")
        lance.write_dataset(pa.table({"a": [3]}), "v.lance", mode="append")
        lance.write_dataset(pa.table({"a": [9]}), "v.lance", mode="overwrite")
        ds = lance.dataset("v.lance")
        ds.tags.create("before-overwrite", 2)
        result = ([v["version"] for v in ds.versions()], ds.latest_version,
                  lance.dataset("v.lance", version=1).to_table().to_pydict(),
                  lance.dataset("v.lance", version="before-overwrite").to_table().to_pydict(),
                  ds.checkout_version(2).count_rows(), sorted(ds.tags.list()))
    """,
    "delete, update, restore": """
        import pyarrow as pa
        ds = lance.write_dataset(pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}), "m.lance")
        ds.delete("id = 2")
        ds.update({"v": "'z'"}, where="id > 2")
        after = ds.to_table().to_pydict()
        ds = lance.dataset("m.lance", version=1)
        ds.restore()
        result = (after, lance.dataset("m.lance").to_table().to_pydict(), lance.dataset("m.lance").version)
    """,
    "merge_insert upsert": """
        import pyarrow as pa
        ds = lance.write_dataset(pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), "u.lance")
        new = pa.table({"id": [2, 4], "v": [200, 400]})
        stats = ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(new)
        result = (sorted(lance.dataset("u.lance").to_table().to_pylist(), key=lambda r: r["id"]),
                  stats["num_inserted_rows"], stats["num_updated_rows"], stats["num_deleted_rows"])
    """,
    "schema evolution": """
        import pyarrow as pa
        ds = lance.write_dataset(pa.table({"id": [1, 2], "name": ["a", "b"]}), "s.lance")
        ds.add_columns({"double_id": "id * 2"})
        ds.alter_columns({"path": "name", "name": "label"})
        ds.drop_columns(["double_id"])
        ds.add_columns(pa.field("extra", pa.string()))
        result = (ds.schema.names, ds.to_table().to_pydict(), ds.version)
    """,
    "compaction and cleanup": """
        import pyarrow as pa
        from datetime import timedelta
        for i in range(5):
            lance.write_dataset(pa.table({"x": [i]}), "c.lance", mode="append" if i else "create")
        ds = lance.dataset("c.lance")
        metrics = ds.optimize.compact_files(target_rows_per_fragment=1024)
        stats = lance.dataset("c.lance").cleanup_old_versions(older_than=timedelta(0))
        ds = lance.dataset("c.lance")
        result = (len(ds.get_fragments()), sorted(ds.to_table().column("x").to_pylist()),
                  metrics.fragments_removed, metrics.fragments_added, stats.old_versions, len(ds.versions()))
    """,
    "batches and scanner": """
        import pyarrow as pa
        lance.write_dataset(pa.table({"x": range(1000), "y": [str(i) for i in range(1000)]}), "b.lance")
        ds = lance.dataset("b.lance")
        sizes = [b.num_rows for b in ds.to_batches(batch_size=300, columns=["x"])]
        scanner = ds.scanner(filter="x % 100 = 0", columns=["y"], with_row_id=True)
        result = (sizes, scanner.to_table().to_pydict(), scanner.count_rows(),
                  ds.to_table(columns={"twice": "x * 2"}, limit=3).to_pydict())
    """,
    "stable row ids and lineage": """
        import pyarrow as pa
        ds = lance.write_dataset(pa.table({"k": [1, 2, 3]}), "r.lance", enable_stable_row_ids=True)
        ds.update({"k": "k + 10"}, where="k = 2")
        t = ds.to_table(columns=["k", "_rowid", "_row_created_at_version", "_row_last_updated_at_version"])
        result = sorted(t.to_pylist(), key=lambda r: r["_rowid"])
    """,
    "config, metadata and stats": """
        import pyarrow as pa
        ds = lance.write_dataset(pa.table({"x": [1, 2, 3]}), "cfg.lance")
        ds.update_config({"owner": "data-eng"})
        ds.update_schema_metadata({"source": "crm"})
        result = (ds.config(), ds.schema.metadata, ds.stats.dataset_stats(), ds.data_storage_version,
                  list(ds.fragment_ids()), ds.get_version()["metadata"]["total_rows"])
    """,
    "join new columns and explain a cleanup": """
        import pyarrow as pa
        from datetime import timedelta
        ds = lance.write_dataset(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), "j.lance")
        ds.merge(pa.table({"id": [3, 1], "label": ["three", "one"]}), "id")
        plan = ds.explain_cleanup_old_versions(older_than=timedelta(0))
        result = (ds.to_table().to_pydict(), plan.stats.old_versions, ds.version,
                  lance.json_to_schema(lance.schema_to_json(ds.schema)) == ds.schema)
    """,
    "realistic filters": """
        import pyarrow as pa
        urls = [f"https://shop.example.com/p/{i}?ref=mail" if i % 3 else f"http://blog.example.org/{i}"
                for i in range(60)]
        tbl = pa.table({"id": range(60), "url": urls, "tags": [["new", "sale"] if i % 4 == 0 else ["old"]
                                                               for i in range(60)]})
        ds = lance.write_dataset(tbl, "f.lance")
        result = (ds.count_rows("starts_with(url, 'https') AND id < 10"),
                  ds.to_table(filter="array_has_any(tags, ['sale']) AND regexp_match(url, 'blog')",
                              columns=["id"]).to_pydict(),
                  ds.to_table(filter="strpos(url, 'p/1') > 0", columns=["id"]).to_pydict())
    """,
}


def _run(engine, snippet: str, directory) -> object:
    scope = {"lance": engine}
    import os

    cwd = os.getcwd()
    os.chdir(directory)
    try:
        exec(compile(textwrap.dedent(snippet), "<snippet>", "exec"), scope)  # noqa: S102 - the test's own code
    finally:
        os.chdir(cwd)
    return scope["result"]


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_snippet_runs_unchanged(tmp_path, name):
    (tmp_path / "pylance").mkdir()
    (tmp_path / "ours").mkdir()
    theirs = _run(pylance, SNIPPETS[name], tmp_path / "pylance")
    ours = _run(lance_format, SNIPPETS[name], tmp_path / "ours")
    assert ours == theirs
