"""Realistic tables for the ZONEMAP / BLOOMFILTER / LABEL_LIST / NGRAM tests, written by pylance."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

TAGS = ["red", "green", "blue", "yellow", "black", "white", "urgent", "näive"]
CATEGORIES = ["alpha", "beta", "gamma", "delta", "epsilon"]


def realistic_table(n: int = 24_000, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(n, dtype=np.int64)
    # skewed categories with some nulls
    cat = rng.choice(CATEGORIES, size=n, p=[0.7, 0.2, 0.07, 0.02, 0.01]).astype(object)
    cat[rng.random(n) < 0.03] = None
    x = rng.normal(size=n)
    x[rng.random(n) < 0.02] = np.nan
    x[::97] = -0.0
    x_mask = rng.random(n) < 0.04
    # tags: lists with nulls, empty lists and null items
    counts = rng.integers(0, 4, size=n)
    tags = [list(rng.choice(TAGS, size=c, replace=False)) for c in counts]
    for i in rng.choice(n, size=n // 20, replace=False):
        tags[i] = None
    for i in rng.choice(n, size=n // 50, replace=False):
        if tags[i]:
            tags[i] = [*tags[i], None]
    hosts = ["Example.com", "shop.example.org", "Café-Münster.de", "mail.google.com", "ÅRHUS.dk"]
    url = [f"https://{hosts[i % 5]}/p/{i * 7919 % 10007}?q=Straße{i % 13}" if i % 11 else None for i in range(n)]
    email = [f"user{i % 503}.{['smith', 'ÉLODIE', 'o_brien'][i % 3]}@{hosts[i % 4].lower()}" for i in range(n)]
    ts = (np.datetime64("2024-01-01T00:00:00", "us") + (ids * 3_600_000_000 // 7).astype("timedelta64[us]"))
    return pa.table({
        "id": ids,
        "cat": pa.array(cat, pa.string()),
        "x": pa.array(x, mask=x_mask),
        "tags": pa.array(tags, pa.list_(pa.string())),
        "url": pa.array(url, pa.string()),
        "email": pa.array(email, pa.large_string()),
        "ts": pa.array(ts, pa.timestamp("us")),
        "score": pa.array(rng.integers(0, 1000, size=n).astype(np.int32)),
    })


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return realistic_table()


@pytest.fixture
def dataset_uri(tmp_path, table):
    """A 2.2 table of 4 fragments with deletions inside and at fragment edges."""
    uri = str(tmp_path / "t.lance")
    ds = lance.write_dataset(table, uri, max_rows_per_file=7_000)
    ds.delete("id % 53 = 0 OR id = 7000 OR id = 13999")
    return uri
