package org.lanceformat.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One scan's columns and filters. Each scan of a table gets its own builder (Spark's DSv2 rule),
 * so one scan's filters never reach another's. Pruning is by top-level column. Every filter the
 * engine can take is pushed to it (it skips rows while decoding), and every filter is also
 * returned to Spark, which evaluates it again on the rows read: an answer never depends on the
 * engine evaluating a filter exactly as Spark would.
 */
final class LanceScanBuilder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
  private final LanceTable table;
  private final StructType schema;
  private final CaseInsensitiveStringMap options;
  private StructType required;
  private Filter[] pushed = new Filter[0];
  private final List<Object> translated = new ArrayList<>();

  LanceScanBuilder(LanceTable table, StructType schema, CaseInsensitiveStringMap options) {
    this.table = table;
    this.schema = schema;
    this.options = options;
    this.required = schema;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    List<StructField> kept = new ArrayList<>();
    for (StructField field : schema.fields()) { // the table's order and types, whole fields
      for (String name : requiredSchema.fieldNames()) {
        if (name.equals(field.name())) {
          kept.add(field);
          break;
        }
      }
    }
    required = new StructType(kept.toArray(new StructField[0]));
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    List<Filter> taken = new ArrayList<>();
    translated.clear();
    for (Filter filter : filters) {
      Object json = Filters.toJson(filter);
      if (json != null) {
        taken.add(filter);
        translated.add(json);
      }
    }
    pushed = taken.toArray(new Filter[0]);
    return filters; // all of them: Spark evaluates them again after the scan
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed;
  }

  @Override
  public Scan build() {
    return new LanceScan(table, schema, required, options, new ArrayList<>(translated), Worker.of());
  }
}
