"""Spark integration: distributed reads and writes of Lance tables from PySpark 4.

This is the only part of ``lance_format`` that imports pyspark (``import lance_format`` never
does). Rows never travel through the driver: executors write data files and read splits; the
driver plans, pins versions and commits once, in the caller's process.

* :func:`write_dataframe` -- a DataFrame as one new version (create, append, overwrite,
  ``replace_where``), returning a :class:`CommitResult`;
* :func:`merge_dataframe` -- upsert by key, one ``Update`` commit;
* :func:`read_dataframe` -- a pinned version as a DataFrame (projection and filter in the engine);
* :func:`read_changes` -- the change feed between two versions as a DataFrame;
* :func:`create_index` -- a vector index trained on a sample, built by the executors, committed once;
* :func:`nearest` -- a k-nearest-neighbour join of query vectors against a table (exact, distributed);
* :func:`merge_each_batch` -- a ``foreachBatch`` function merging each micro-batch by key;
* :func:`ship_to_executors` -- zip this package onto the Python path of a cluster's executors;
* :func:`lance_arrow_schema` -- the Arrow schema of a new table written from a DataFrame schema;
* :func:`register` -- the ``lance`` data source for ``spark.read.format("lance")``,
  ``df.write.format("lance")``, ``readStream``/``writeStream`` and ``CREATE TABLE ... USING lance``.
"""

from lance_format.distributed import IDEMPOTENCY_KEY
from lance_format.spark.changes import read_changes
from lance_format.spark.common import CommitResult
from lance_format.spark.datasource import register
from lance_format.spark.indices import create_scalar_index
from lance_format.spark.merge import merge_dataframe
from lance_format.spark.nearest import nearest
from lance_format.spark.read import read_dataframe
from lance_format.spark.shipping import ship_to_executors
from lance_format.spark.streaming_sink import merge_each_batch
from lance_format.spark.types import lance_arrow_schema
from lance_format.spark.vector_index import create_index
from lance_format.spark.write import write_dataframe

__all__ = [
    "CommitResult", "IDEMPOTENCY_KEY", "write_dataframe", "merge_dataframe", "read_dataframe", "read_changes",
    "merge_each_batch", "register", "ship_to_executors", "create_scalar_index", "create_index", "lance_arrow_schema", "nearest",
]
