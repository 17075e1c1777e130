"""``scanner(scan_stats_callback=...)`` and ``ScanStatistics`` like pylance 14: the callback gets
one report per scan, after its last batch, with pylance's field names and counts."""

from __future__ import annotations

from types import ModuleType

import lance
import pyarrow as pa
import pytest

import lance_format

ENGINES = [lance, lance_format]
FIELDS = ["all_counts", "all_times", "bytes_read", "index_cache_hits", "index_cache_misses", "index_comparisons",
          "indices_loaded", "iops", "parts_loaded", "requests"]


def _stats(engine: ModuleType, uri: str, **scan) -> list:
    engine.write_dataset(pa.table({"a": list(range(1000))}), uri, max_rows_per_file=300)
    reports: list = []
    table = engine.dataset(uri).scanner(scan_stats_callback=reports.append, **scan).to_table()
    assert len(reports) == 1
    report = reports[0]
    assert all(hasattr(report, name) for name in FIELDS)
    counts = report.all_counts
    return [table.num_rows, counts["fragments_scanned"], counts["ranges_scanned"], counts["rows_scanned"],
            report.indices_loaded, report.index_comparisons, report.iops > 0, report.bytes_read > 0,
            report.requests == report.iops, isinstance(report, engine.ScanStatistics)]


@pytest.mark.parametrize("scan", [{}, {"filter": "a >= 500"}, {"columns": ["a"], "filter": "a < 10"}])
def test_scan_statistics_like_pylance(tmp_path, scan):
    ours = _stats(lance_format, str(tmp_path / "ours"), **scan)
    assert ours == _stats(lance, str(tmp_path / "theirs"), **scan)
    assert ours[1:4] == [4, 4, 1000]


def test_scan_stats_callback_must_be_callable(tmp_path):
    ds = lance_format.write_dataset(pa.table({"a": [1]}), str(tmp_path / "t"))
    with pytest.raises(lance_format.InvalidInputError):
        ds.scanner(scan_stats_callback=3)
