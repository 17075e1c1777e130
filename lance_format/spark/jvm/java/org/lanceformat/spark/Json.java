package org.lanceformat.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Map;

/** JSON of the worker protocol (Jackson, which Spark ships). */
final class Json {
  static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  /** {@code key, value, key, value, ...} as a JSON object. */
  static String object(Object... pairs) {
    Map<String, Object> map = new LinkedHashMap<>();
    for (int i = 0; i < pairs.length; i += 2) {
      map.put((String) pairs[i], pairs[i + 1]);
    }
    try {
      return MAPPER.writeValueAsString(map);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static JsonNode parse(String json) {
    try {
      return MAPPER.readTree(json);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String field(String json, String name) {
    return parse(json).get(name).asText();
  }

  /** A one-answer request to a pooled worker; the engine's error becomes the exception's message. */
  static String call(Worker worker, String request) {
    try {
      return PythonWorker.call(worker.python, worker.path, request);
    } catch (IOException e) {
      throw new LanceException(e.getMessage(), e);
    }
  }
}
