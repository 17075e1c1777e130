"""Variants of the ``lance`` data source for the pushdown tests (importable by Spark's workers).

* ``lance_pushdown``: :class:`LancePushdownDataSource` registered by hand, as a user could, on
  whatever Spark runs: on a leaking Spark its reader must still return every filter.
* ``lance_accepting``: a reader that accepts filters whatever the Spark version, i.e. what the
  ``lance`` source does on a Spark without the scan leak. Used on fresh DataFrames (one scan
  each) to test how accepted filters are evaluated, and once on purpose to show the leak.
"""

from __future__ import annotations

from lance_format.spark.datasource import LanceDataSource, LancePushdownDataSource, LancePushdownReader


class PushdownSource(LancePushdownDataSource):
    @classmethod
    def name(cls) -> str:
        return "lance_pushdown"


class AcceptingReader(LancePushdownReader):
    @staticmethod
    def _accepts_filters() -> bool:
        return True


class AcceptingSource(LanceDataSource):
    _reader_class = AcceptingReader

    @classmethod
    def name(cls) -> str:
        return "lance_accepting"


def register_variants(spark) -> None:
    spark.dataSource.register(PushdownSource)
    spark.dataSource.register(AcceptingSource)
