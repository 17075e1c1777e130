package org.lanceformat.spark;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * Spark's filters as JSON for the worker, which turns them into the engine's SQL with the
 * Python source's own rules ({@code lance_format.spark.pushed_filters.filter_sql}) and keeps
 * only those. Values are tagged with their type; a filter on a nested field or with a value of
 * another type (timestamps, binary) is not sent.
 */
final class Filters {
  private Filters() {}

  static Object toJson(Filter filter) {
    if (filter instanceof And) {
      And and = (And) filter;
      return node("And", toJson(and.left()), toJson(and.right()));
    }
    if (filter instanceof Or) {
      Or or = (Or) filter;
      return node("Or", toJson(or.left()), toJson(or.right()));
    }
    if (filter instanceof Not) {
      Object child = toJson(((Not) filter).child());
      return child == null ? null : node("Not", child, null);
    }
    if (filter instanceof EqualTo) {
      return leaf("EqualTo", ((EqualTo) filter).attribute(), ((EqualTo) filter).value());
    }
    if (filter instanceof EqualNullSafe) {
      return leaf("EqualNullSafe", ((EqualNullSafe) filter).attribute(), ((EqualNullSafe) filter).value());
    }
    if (filter instanceof GreaterThan) {
      return leaf("GreaterThan", ((GreaterThan) filter).attribute(), ((GreaterThan) filter).value());
    }
    if (filter instanceof GreaterThanOrEqual) {
      return leaf("GreaterThanOrEqual", ((GreaterThanOrEqual) filter).attribute(),
          ((GreaterThanOrEqual) filter).value());
    }
    if (filter instanceof LessThan) {
      return leaf("LessThan", ((LessThan) filter).attribute(), ((LessThan) filter).value());
    }
    if (filter instanceof LessThanOrEqual) {
      return leaf("LessThanOrEqual", ((LessThanOrEqual) filter).attribute(), ((LessThanOrEqual) filter).value());
    }
    if (filter instanceof StringStartsWith) {
      return leaf("StringStartsWith", ((StringStartsWith) filter).attribute(), ((StringStartsWith) filter).value());
    }
    if (filter instanceof StringEndsWith) {
      return leaf("StringEndsWith", ((StringEndsWith) filter).attribute(), ((StringEndsWith) filter).value());
    }
    if (filter instanceof StringContains) {
      return leaf("StringContains", ((StringContains) filter).attribute(), ((StringContains) filter).value());
    }
    if (filter instanceof IsNull) {
      return leaf("IsNull", ((IsNull) filter).attribute(), null);
    }
    if (filter instanceof IsNotNull) {
      return leaf("IsNotNull", ((IsNotNull) filter).attribute(), null);
    }
    if (filter instanceof In) {
      In in = (In) filter;
      if (!topLevel(in.attribute())) {
        return null;
      }
      List<Object> values = new ArrayList<>();
      for (Object v : in.values()) {
        Object tagged = value(v);
        if (tagged == null) {
          return null;
        }
        values.add(tagged);
      }
      Map<String, Object> json = new LinkedHashMap<>();
      json.put("op", "In");
      json.put("attr", in.attribute());
      json.put("values", values);
      return json;
    }
    return null;
  }

  private static boolean topLevel(String attribute) {
    return attribute.indexOf('.') < 0 && attribute.indexOf('`') < 0;
  }

  private static Object node(String op, Object left, Object right) {
    if (left == null && right == null) {
      return null;
    }
    Map<String, Object> json = new LinkedHashMap<>();
    json.put("op", op);
    json.put("left", left);
    json.put("right", right);
    return json;
  }

  private static Object leaf(String op, String attribute, Object value) {
    if (!topLevel(attribute)) {
      return null;
    }
    Map<String, Object> json = new LinkedHashMap<>();
    json.put("op", op);
    json.put("attr", attribute);
    boolean valued = !(op.equals("IsNull") || op.equals("IsNotNull"));
    if (valued) {
      Object tagged = value(value);
      if (tagged == null) {
        return null;
      }
      json.put("value", tagged);
    }
    return json;
  }

  /** A filter value tagged with its type, or null for a type the engine is not given. */
  private static Object value(Object v) {
    String type;
    Object text;
    if (v instanceof String) {
      type = "str";
      text = v;
    } else if (v instanceof Boolean) {
      type = "bool";
      text = v;
    } else if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
      type = "int";
      text = ((Number) v).toString();
    } else if (v instanceof Float || v instanceof Double) {
      type = "float";
      text = v.toString(); // NaN, Infinity as text
    } else if (v instanceof BigDecimal) {
      type = "decimal";
      text = ((BigDecimal) v).toString();
    } else if (v instanceof java.sql.Date || v instanceof java.time.LocalDate) {
      type = "date";
      text = v.toString(); // yyyy-mm-dd
    } else {
      return null;
    }
    Map<String, Object> json = new LinkedHashMap<>();
    json.put("t", type);
    json.put("v", text);
    return json;
  }
}
