"""Arrow batches a Spark task hands to the writer (df.write.format("lance"), write_dataframe,
merge_dataframe and the streaming sink all go through PartitionWriter) are checked: a malformed
one is a typed error naming the column, and the task leaves no file behind."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from lance_format.errors import MalformedInputError
from lance_format.spark.tasks import write_partition, write_task
from lance_format.spark.write_plan import plan_write

from ..malformed_arrow import CASES


@pytest.mark.parametrize("run", ["write_task", "write_partition"])
def test_a_task_refuses_malformed_rows_and_leaves_no_file(tmp_path, run):
    uri = str(tmp_path / "t.lance")
    plan = plan_write(StructType([StructField("id", LongType()), StructField("url", StringType())]), uri,
                      mode="create")
    good = pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()),
                            "url": ["https://example.org/a", None, "mailto:ada@example.com"]})
    bad = pa.record_batch({"id": pa.array([4, 5, 6], pa.int64()), "url": CASES["string offsets backwards"][0]()})
    with pytest.raises(MalformedInputError, match=r"column 'url', chunk 0: non-monotonic offsets") as info:
        if run == "write_task":
            renamed = [pa.RecordBatch.from_arrays(b.columns, names=["_c0", "_c1"]) for b in (good, bad)]
            list(write_task(plan.spec(), ("id", "url"))(iter(renamed)))
        else:
            write_partition(plan.spec(), iter([good, bad]))
    assert info.value.column == "url"
    data = os.path.join(uri, "data")
    assert not os.path.isdir(data) or os.listdir(data) == []
