package dev.fencepost.bench.streams;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * The app's configuration: the topics it reads and writes, and the Kafka
 * Streams properties it runs with. Later sources win: a properties file
 * ({@code -c FILE}), then environment variables, then {@code key=value}
 * arguments. Anything not set is Kafka Streams' own default.
 */
final class Settings {
  /** An environment variable and the property it sets. */
  record Env(String variable, String property, String what) {}

  /** The environment variables read, in the order the README lists them. */
  static final List<Env> ENV = List.of(
      new Env("BENCH_BROKERS", "bootstrap.servers", "the brokers (host:port, comma-separated)"),
      new Env("BENCH_GROUP", "application.id", "the application id: the consumer group, the transactional id prefix"),
      new Env("BENCH_INPUT", Settings.INPUT, "the topic of shop events to read"),
      new Env("BENCH_OUTPUT", Settings.OUTPUT, "the topic to write the purchases to (must exist)"),
      new Env("STREAMS_PROCESSING_GUARANTEE", "processing.guarantee", "at_least_once or exactly_once_v2"),
      new Env("STREAMS_NUM_STREAM_THREADS", "num.stream.threads", "stream threads"),
      new Env("STREAMS_COMMIT_INTERVAL_MS", "commit.interval.ms", "how often offsets (and transactions) commit"),
      new Env("STREAMS_PRODUCER_LINGER_MS", "producer.linger.ms", "the producer's linger"),
      new Env("STREAMS_PRODUCER_BATCH_SIZE", "producer.batch.size", "the producer's batch size, bytes"),
      new Env("STREAMS_CACHE_MAX_BYTES", "statestore.cache.max.bytes", "the record cache (the current name of cache.max.bytes.buffering)"),
      new Env("STREAMS_STATE_DIR", "state.dir", "the state directory"));

  /** The property naming the input topic (not a Kafka Streams property). */
  static final String INPUT = "input.topic";
  /** The property naming the output topic (not a Kafka Streams property). */
  static final String OUTPUT = "output.topic";

  /** The values used for what nothing sets: the other engines' defaults. */
  static final Map<String, String> DEFAULTS = Map.of(
      "bootstrap.servers", "127.0.0.1:9092",
      "application.id", "bench",
      INPUT, "events",
      OUTPUT, "purchases");

  final String input;
  final String output;
  /** The Kafka Streams properties, the topics removed. */
  final Properties streams;
  /** Where each property set came from, for the start-up line. */
  final Map<String, String> origin;

  private Settings(String input, String output, Properties streams, Map<String, String> origin) {
    this.input = input;
    this.output = output;
    this.streams = streams;
    this.origin = origin;
  }

  /** A command line or configuration the app cannot run with. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  /** Reads the configuration from args and env (the process's environment). */
  static Settings parse(String[] args, Map<String, String> env) throws UsageException {
    Map<String, String> set = new LinkedHashMap<>(DEFAULTS);
    Map<String, String> origin = new LinkedHashMap<>();
    DEFAULTS.keySet().forEach(k -> origin.put(k, "default"));
    List<String> pairs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("-c") || a.equals("--config")) {
        if (++i == args.length) {
          throw new UsageException(a + " needs a file name");
        }
        Path file = Path.of(args[i]);
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file)) {
          p.load(r);
        } catch (IOException e) {
          throw new UsageException("cannot read the properties file " + file + ": " + e.getMessage());
        }
        for (String k : p.stringPropertyNames()) {
          set.put(k, p.getProperty(k).trim());
          origin.put(k, file.getFileName().toString());
        }
      } else if (a.indexOf('=') > 0) {
        pairs.add(a);
      } else {
        throw new UsageException("unknown argument " + a + ": want -c FILE.properties or key=value");
      }
    }
    for (Env e : ENV) {
      String v = env.get(e.variable());
      if (v != null && !v.isBlank()) {
        set.put(e.property(), v.trim());
        origin.put(e.property(), "$" + e.variable());
      }
    }
    for (String a : pairs) {
      int eq = a.indexOf('=');
      set.put(a.substring(0, eq).trim(), a.substring(eq + 1).trim());
      origin.put(a.substring(0, eq).trim(), "argument");
    }
    String guarantee = set.get("processing.guarantee");
    if (guarantee != null && !guarantee.equals("at_least_once") && !guarantee.equals("exactly_once_v2")) {
      throw new UsageException("processing.guarantee is " + guarantee + " (from " + origin.get("processing.guarantee")
          + "): want at_least_once or exactly_once_v2");
    }
    Properties props = new Properties();
    set.forEach(props::setProperty);
    String input = (String) props.remove(INPUT);
    String output = (String) props.remove(OUTPUT);
    if (input.isEmpty() || output.isEmpty()) {
      throw new UsageException("the input and output topics must be named (BENCH_INPUT, BENCH_OUTPUT)");
    }
    return new Settings(input, output, props, origin);
  }

  /**
   * One line saying what runs: the topics and the benchmark's knobs with
   * where each came from. Only the knobs' values are shown, never other
   * properties' (they may hold credentials).
   */
  String describe() {
    StringBuilder b = new StringBuilder("streams-bench: " + input + " -> " + output);
    for (Env e : ENV) {
      String k = e.property();
      if (k.equals(INPUT) || k.equals(OUTPUT)) {
        continue;
      }
      String v = streams.getProperty(k);
      b.append(' ').append(k).append('=').append(v == null ? "(Kafka Streams default)" : v);
    }
    List<String> others = new ArrayList<>();
    for (String k : streams.stringPropertyNames()) {
      if (ENV.stream().noneMatch(e -> e.property().equals(k))) {
        others.add(k);
      }
    }
    if (!others.isEmpty()) {
      java.util.Collections.sort(others);
      b.append(" also set: ").append(String.join(", ", others));
    }
    return b.toString();
  }
}
