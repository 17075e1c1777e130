package org.lanceformat.spark;

import java.util.EnumSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A Lance table: batch scans are the JVM's ({@link LanceScanBuilder}); writes, streams and the
 * change feed are the Python data source's (Spark's own {@link PythonDataSourceV2} over the
 * Python source {@code register} adds as {@code lance_python}), with the same options and schema.
 */
final class LanceTable implements Table, SupportsRead, SupportsWrite {
  /** Options of the change feed, which only the Python source reads. */
  private static final Set<String> CHANGE_FEED = Set.of("begin_version", "end_version", "readchangefeed");

  private final StructType schema;
  private final Transform[] partitioning;
  private final Map<String, String> properties;
  private Table python;

  LanceTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    this.schema = schema;
    this.partitioning = partitioning;
    this.properties = properties;
  }

  /** The Python data source's table (created when first needed). */
  synchronized Table python() {
    if (python == null) {
      PythonDataSourceV2 source = new PythonDataSourceV2();
      source.setShortName("lance_python"); // lance_format.spark.datasource.DELEGATE_NAME
      python = source.getTable(schema, partitioning, properties);
    }
    return python;
  }

  @Override
  public String name() {
    return "lance";
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Transform[] partitioning() {
    return partitioning;
  }

  @Override
  public Map<String, String> properties() {
    return properties;
  }

  @Override
  public Set<TableCapability> capabilities() {
    try {
      return python().capabilities();
    } catch (RuntimeException e) { // the Python source is not registered: reads only
      return EnumSet.of(TableCapability.BATCH_READ);
    }
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    for (String key : options.keySet()) {
      if (CHANGE_FEED.contains(key.toLowerCase(Locale.ROOT))) {
        return ((SupportsRead) python()).newScanBuilder(options);
      }
    }
    return new LanceScanBuilder(this, schema, options);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python()).newWriteBuilder(info);
  }
}
