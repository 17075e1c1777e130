package org.lanceformat.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.OptionalLong;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A planned scan: the worker plans it (the Python source's reader, narrowed to the pruned
 * columns and the pushed filters) the first time Spark asks for its statistics or partitions.
 * Statistics are the live rows of the pinned version and its data files' bytes, scaled by the
 * share of the columns read (as Spark's file sources scale theirs), so Spark broadcasts small
 * tables. One input partition per split; a stream is the Python source's.
 */
final class LanceScan implements Scan, Batch, SupportsReportStatistics {
  private final LanceTable table;
  private final StructType schema;
  private final StructType required;
  private final CaseInsensitiveStringMap options;
  private final List<Object> filters;
  private final Worker worker;
  private JsonNode plan;

  LanceScan(LanceTable table, StructType schema, StructType required, CaseInsensitiveStringMap options,
      List<Object> filters, Worker worker) {
    this.table = table;
    this.schema = schema;
    this.required = required;
    this.options = options;
    this.filters = filters;
    this.worker = worker;
  }

  /** The columns asked of the engine: those read, or the first one when none is (a count). */
  private List<String> columns() {
    List<String> names = new ArrayList<>(List.of(required.fieldNames()));
    if (names.isEmpty() && schema.fields().length > 0) {
      names.add(schema.fields()[0].name());
    }
    return names;
  }

  private synchronized JsonNode plan() {
    if (plan == null) {
      String request = Json.object("op", "plan", "options", options.asCaseSensitiveMap(), "schema", schema.json(),
          "columns", columns(), "filters", filters);
      plan = Json.parse(Json.call(worker, request));
    }
    return plan;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    String pushed = plan == null ? "" : " filters=" + plan.get("filters");
    return "lance " + options.get("path") + " columns=" + columns() + pushed;
  }

  @Override
  public Statistics estimateStatistics() {
    JsonNode p = plan();
    long rows = p.get("rows").asLong();
    long bytes = p.get("bytes").asLong();
    int all = Math.max(1, schema.defaultSize());
    long size = Math.max(1L, (long) (bytes * ((double) Math.max(required.defaultSize(), 1) / all)));
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return OptionalLong.of(size);
      }

      @Override
      public OptionalLong numRows() {
        return OptionalLong.of(rows);
      }
    };
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return ((org.apache.spark.sql.connector.catalog.SupportsRead) table.python()).newScanBuilder(options).build().toMicroBatchStream(checkpointLocation);
  }

  @Override
  public InputPartition[] planInputPartitions() {
    JsonNode p = plan();
    int splits = p.get("splits").asInt();
    String blob = p.get("plan").asText();
    InputPartition[] partitions = new InputPartition[splits];
    for (int i = 0; i < splits; i++) {
      partitions[i] = new LancePartition(blob, i);
    }
    return partitions;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new LanceReaderFactory(worker, required.fields().length);
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof LanceScan)) {
      return false;
    }
    LanceScan that = (LanceScan) other;
    return required.equals(that.required) && options.equals(that.options) && filters.equals(that.filters)
        && plan().get("plan").equals(that.plan().get("plan"));
  }

  @Override
  public int hashCode() {
    return Objects.hash(required, options, filters);
  }
}
