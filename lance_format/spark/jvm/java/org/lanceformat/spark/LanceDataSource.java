package org.lanceformat.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("lance")} as a DataSource V2: the JVM does what Spark asks of a V2 source
 * (column pruning, filter pushdown, statistics, columnar batches) and a Python worker does the
 * rest with the pure-Python engine. Writes, streams and the change feed go to the Python data
 * source {@code lance_format.spark.register(spark)} adds as {@code lance_python} ({@link LanceTable#python}).
 */
public final class LanceDataSource implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "lance";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    String answer = Json.call(Worker.of(), Json.object("op", "schema", "options", options.asCaseSensitiveMap()));
    return (StructType) DataType.fromJson(Json.field(answer, "schema"));
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new LanceTable(schema, partitioning, properties);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true; // a catalog table's schema, or a user's .schema(...)
  }
}
