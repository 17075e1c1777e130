package org.lanceformat.spark;

/** A failure of the Python engine (its message) or of the worker process. */
public final class LanceException extends RuntimeException {
  LanceException(String message, Throwable cause) {
    super(message, cause);
  }
}
