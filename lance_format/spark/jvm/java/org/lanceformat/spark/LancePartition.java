package org.lanceformat.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One split of a planned read: the worker's pickled plan and the split's index in it. */
final class LancePartition implements InputPartition {
  final String plan;
  final int split;

  LancePartition(String plan, int split) {
    this.plan = plan;
    this.split = split;
  }
}
