package org.lanceformat.spark;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;

/**
 * A long-lived {@code python -m lance_format.spark.jvm.worker} process: the pure-Python engine
 * plans and decodes, this JVM only asks (see worker.py for the protocol). Idle workers are kept
 * per (python, path) in this JVM and reused, so a query pays no interpreter start-up; a worker
 * whose answer was not read to its end is killed, never reused.
 */
final class PythonWorker {
  static final int JSON = 0, ARROW = 1, END = 2, ERROR = 3;
  private static final int MAX_IDLE = 8;
  private static final Map<String, ConcurrentLinkedDeque<PythonWorker>> IDLE = new ConcurrentHashMap<>();

  private final String key;
  private final Process process;
  private final DataOutputStream requests;
  private final DataInputStream answers;

  private PythonWorker(String key, String python, String path) throws IOException {
    this.key = key;
    List<String> command = new ArrayList<>();
    command.add(python);
    command.add("-m");
    command.add("lance_format.spark.jvm.worker");
    ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
    if (path != null && !path.isEmpty()) {
      String old = builder.environment().get("PYTHONPATH");
      builder.environment().put("PYTHONPATH", old == null || old.isEmpty() ? path : path + java.io.File.pathSeparator + old);
    }
    process = builder.start();
    requests = new DataOutputStream(new BufferedOutputStream(process.getOutputStream(), 1 << 16));
    answers = new DataInputStream(new BufferedInputStream(process.getInputStream(), 1 << 20));
  }

  /** An idle worker of this interpreter and path, or a new one. */
  static PythonWorker borrow(String python, String path) throws IOException {
    String key = python + "\u0000" + path;
    ConcurrentLinkedDeque<PythonWorker> idle = IDLE.computeIfAbsent(key, k -> new ConcurrentLinkedDeque<>());
    PythonWorker worker;
    while ((worker = idle.pollFirst()) != null) {
      if (worker.process.isAlive()) {
        return worker;
      }
    }
    return new PythonWorker(key, python, path);
  }

  /** Back to the pool, after an answer was read to its end. */
  void release() {
    ConcurrentLinkedDeque<PythonWorker> idle = IDLE.get(key);
    if (process.isAlive() && idle != null && idle.size() < MAX_IDLE) {
      idle.addFirst(this);
    } else {
      destroy();
    }
  }

  void destroy() {
    process.destroyForcibly();
  }

  void send(String json) throws IOException {
    byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
    requests.writeInt(bytes.length);
    requests.write(bytes);
    requests.flush();
  }

  private byte[] payload(int length) throws IOException {
    byte[] bytes = new byte[length];
    answers.readFully(bytes);
    return bytes;
  }

  private IOException failure(byte[] message) {
    return new IOException("lance: " + new String(message, StandardCharsets.UTF_8));
  }

  /** A request answered by one JSON frame (schema, plan); the worker goes back to the pool. */
  static String call(String python, String path, String json) throws IOException {
    PythonWorker worker = borrow(python, path);
    try {
      worker.send(json);
      int kind = worker.answers.readInt();
      byte[] answer = worker.payload(worker.answers.readInt());
      worker.release();
      if (kind == ERROR) {
        throw worker.failure(answer);
      }
      if (kind != JSON) {
        throw new IOException("lance worker answered with frame kind " + kind);
      }
      return new String(answer, StandardCharsets.UTF_8);
    } catch (IOException | RuntimeException e) {
      worker.destroy();
      throw e;
    }
  }

  /** The Arrow IPC stream of a read request: the payloads of its ARROW frames, up to END. */
  InputStream arrowStream() {
    return new FrameStream();
  }

  private final class FrameStream extends InputStream {
    private int left = 0; // bytes of the current ARROW frame not read yet
    boolean ended = false;

    private boolean fill() throws IOException {
      while (left == 0 && !ended) {
        int kind = answers.readInt();
        int length = answers.readInt();
        if (kind == ARROW) {
          left = length;
        } else if (kind == END) {
          ended = true;
          release();
        } else if (kind == ERROR) {
          IOException e = failure(payload(length));
          destroy();
          throw e;
        } else {
          destroy();
          throw new IOException("lance worker sent frame kind " + kind + " inside a stream");
        }
      }
      return left > 0;
    }

    @Override
    public int read() throws IOException {
      if (!fill()) {
        return -1;
      }
      left--;
      return answers.read();
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      if (!fill()) {
        return -1;
      }
      int n = answers.read(b, off, Math.min(len, left));
      if (n < 0) {
        throw new IOException("lance worker exited inside a stream");
      }
      left -= n;
      return n;
    }

    @Override
    public void close() {
      if (!ended) {
        destroy(); // mid-stream (a LIMIT, a failed task): the rest is never read
      }
    }
  }
}
