package org.lanceformat.spark;

import java.io.IOException;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Columnar reads: a pooled worker decodes the split and streams Arrow record batches, which
 * Spark gets as {@link ArrowColumnVector}s over the received buffers (no copy, no rows).
 */
final class LanceReaderFactory implements PartitionReaderFactory {
  private final Worker worker;
  private final int columns; // 0: a count, the one column read is not handed on

  LanceReaderFactory(Worker worker, int columns) {
    this.worker = worker;
    this.columns = columns;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("the lance source reads columnar batches only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    LancePartition p = (LancePartition) partition;
    try {
      return new Reader(p);
    } catch (IOException e) {
      throw new LanceException(e.getMessage(), e);
    }
  }

  private final class Reader implements PartitionReader<ColumnarBatch> {
    private final BufferAllocator allocator;
    private final ArrowStreamReader stream;
    private ColumnarBatch batch;

    Reader(LancePartition p) throws IOException {
      PythonWorker process = PythonWorker.borrow(worker.python, worker.path);
      try {
        process.send(Json.object("op", "read", "plan", p.plan, "split", p.split));
      } catch (IOException e) {
        process.destroy();
        throw e;
      }
      allocator = ArrowUtils.rootAllocator().newChildAllocator("lance split " + p.split, 0, Long.MAX_VALUE);
      stream = new ArrowStreamReader(process.arrowStream(), allocator);
    }

    @Override
    public boolean next() throws IOException {
      if (!stream.loadNextBatch()) {
        return false;
      }
      VectorSchemaRoot root = stream.getVectorSchemaRoot();
      if (batch == null) { // the root's vectors stay the same objects from batch to batch
        ColumnVector[] vectors = new ColumnVector[columns];
        for (int i = 0; i < columns; i++) {
          vectors[i] = new ArrowColumnVector(root.getVector(i));
        }
        batch = new ColumnarBatch(vectors);
      }
      batch.setNumRows(root.getRowCount());
      return true;
    }

    @Override
    public ColumnarBatch get() {
      return batch;
    }

    @Override
    public void close() throws IOException {
      try {
        stream.close(); // frees the batch's buffers; a stream not read to its end kills its worker
      } finally {
        allocator.close();
      }
    }
  }
}
