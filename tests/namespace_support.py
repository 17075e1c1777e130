"""Helpers of the namespace tests: Arrow IPC payloads, realistic rows, both engines' namespaces."""

from __future__ import annotations

import pyarrow as pa


def ipc(table: pa.Table) -> bytes:
    """An Arrow IPC stream, as namespace clients send rows."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def orders(start: int = 0, n: int = 6) -> pa.Table:
    """Orders with nulls, e-mails, URLs and a skewed category."""
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "email": [None if i % 4 == 1 else f"user{i}@example.com" for i in ids],
        "url": [f"https://shop.example.com/p/{i}?ref=mail" for i in ids],
        "region": ["eu" if i % 5 else "us" for i in ids],
        "amount": [None if i % 3 == 2 else i * 1.25 for i in ids],
    })


def ours(root, **properties):
    from lance_format.namespace import DirectoryNamespace

    return DirectoryNamespace(root=str(root), **{k: str(v) for k, v in properties.items()})


def theirs(root, **properties):
    from lance.namespace import DirectoryNamespace

    return DirectoryNamespace(root=str(root), **{k: str(v) for k, v in properties.items()})
