"""lance_format's public version discovery: TableVersions, NewVersions, VersionSummary.

Summaries are read from manifests and transactions alone; pylance (the oracle) reads the same
tables for row counts, schemas, operations, properties and commit times.
"""

from __future__ import annotations

import datetime as dt

import lance
import pyarrow as pa

import lance_format
from lance_format import TableVersions, VersionSummary


def test_summaries_match_pylance(tmp_path):
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": [1, 2, 3]}), uri, transaction_properties={"source": "oracle"})
    ds = lance_format.dataset(uri)
    ds.delete("id = 2", transaction_properties={"why": "cleanup"})
    ds.add_columns(pa.schema([pa.field("note", pa.string())]))
    versions = TableVersions(uri)
    found = versions.after(0)
    assert found.versions == [1, 2, 3] and not found.more and not found.listed
    assert versions.latest() == 3 and versions.exists(2) and not versions.exists(4)
    oracle = lance.dataset(uri)
    for version in found.versions:
        summary = versions.summary(version)
        theirs = oracle.checkout_version(version)
        txn = oracle.read_transaction(version)
        assert isinstance(summary, VersionSummary) and summary.version == version
        assert summary.row_count == theirs.count_rows()
        assert summary.schema.names == theirs.schema.names
        assert summary.operation == type(txn.operation).__name__.lower()
        assert dict(summary.transaction_properties) == dict(txn.transaction_properties or {})
        assert abs(summary.timestamp - theirs.versions()[version - 1]["timestamp"].astimezone(dt.UTC)
                   ) < dt.timedelta(seconds=1)
    assert versions.summary(2).transaction_properties["why"] == "cleanup"
    assert versions.summary(3).schema.names == ["id", "note"]


def test_no_table_and_summary_of_an_open_version(tmp_path):
    missing = TableVersions(str(tmp_path / "missing.lance"))
    assert missing.latest() is None and missing.after(0).versions == []
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": [1, 2]}), uri)
    summary = VersionSummary.from_manifest(ds.manifest, ds.read_transaction_message())
    assert summary == TableVersions(uri).summary(1)
    assert summary.row_count == 2 and summary.operation == "overwrite"
