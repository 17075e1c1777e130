package org.lanceformat.spark;

import java.io.Serializable;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.internal.SQLConf;

/**
 * Which Python runs the workers, and the path it imports lance_format from: the session's
 * {@code spark.lance.jvm.python} / {@code spark.lance.jvm.pythonPath} (set by
 * {@code lance_format.spark.register}), else PySpark's {@code spark.pyspark.python} or
 * {@code PYSPARK_PYTHON}, else {@code python3}. Decided on the driver and shipped with the scan.
 */
final class Worker implements Serializable {
  final String python;
  final String path;

  private Worker(String python, String path) {
    this.python = python;
    this.path = path;
  }

  static Worker of() {
    SQLConf conf = SQLConf.get();
    String python = conf.getConfString("spark.lance.jvm.python", null);
    if (python == null && SparkEnv.get() != null) {
      python = SparkEnv.get().conf().get("spark.pyspark.python", null);
    }
    if (python == null) {
      python = System.getenv("PYSPARK_PYTHON");
    }
    if (python == null) {
      python = "python3";
    }
    return new Worker(python, conf.getConfString("spark.lance.jvm.pythonPath", ""));
  }
}
