"""A small end-to-end run of the engine on the local filesystem.

Creates a table, appends to it, tags a version, time-travels, filters with SQL, and reads
system columns. The Dagster example pipeline replaces this once the Dagster issue lands.

Run: ``python -m example_project.demo [TABLE_DIR]`` (defaults to a temporary directory).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa

import lance_format


def main(root: str | None = None) -> None:
    base = Path(root) if root else Path(tempfile.mkdtemp(prefix="lance-demo-"))
    uri = str(base / "events.lance")
    events = pa.table(
        {
            "id": pa.array(range(1_000), pa.int64()),
            "kind": pa.array(["click", "view", "buy", "view"] * 250),
            "amount": pa.array([i * 0.5 for i in range(1_000)]),
            "embedding": pa.array([[float(i % 7)] * 8 for i in range(1_000)], pa.list_(pa.float32(), 8)),
        }
    )
    ds = lance_format.write_dataset(events, uri, mode="overwrite", enable_stable_row_ids=True,
                                    commit_message="initial load")
    print(f"created {ds.uri} at version {ds.version} with {ds.count_rows()} rows")

    more = events.slice(0, 100).set_column(0, "id", pa.array(range(1_000, 1_100), pa.int64()))
    ds = lance_format.write_dataset(more, uri, mode="append", transaction_properties={"source": "demo"})
    print(f"appended: version {ds.version}, {ds.count_rows()} rows, {len(ds.get_fragments())} fragments")

    ds.tags.create("first-load", 1)
    old = lance_format.dataset(uri, version="first-load")
    print(f"tag 'first-load' -> version {old.version} with {old.count_rows()} rows")

    buys = ds.to_table(columns=["id", "amount"], filter="kind = 'buy' AND amount >= 400", with_row_id=True)
    print(f"{buys.num_rows} big purchases; first rows:\n{buys.slice(0, 3).to_pandas()}")
    lineage = ds.to_table(columns=["id", "_row_created_at_version"], filter="id >= 998", limit=4)
    print(f"row lineage:\n{lineage.to_pandas()}")
    print("versions:", [v["version"] for v in ds.versions()])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
