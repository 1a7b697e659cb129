package dev.fencepost.bench.state;

import java.time.Duration;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.StateRestoreListener;
import sun.misc.Signal;

/**
 * The Kafka Streams peer of the state benchmarks (bench/cmd/statebench). The
 * property {@code bench.mode} picks the job ({@link Topologies}):
 *
 * <ul>
 *   <li>{@code restore} (the default): counts the input's records per key in
 *       the store "counts" ({@code groupByKey().count()}, a RocksDB store
 *       whose changelog is {@code <application.id>-counts-changelog}), so a
 *       start on an empty state directory restores it;
 *   <li>{@code window}: a windowed count per key, tumbling windows of
 *       {@code bench.window.ms} (60000) with {@code bench.grace.ms} (10000)
 *       of grace, each window written once when it closes (suppress), to
 *       {@code output.topic};
 *   <li>{@code join}: an inner join of the input with the table topic
 *       {@code table.topic}, the row added to each JSON record under {@code
 *       bench.join.as} ("profile"), written to {@code output.topic}.
 * </ul>
 *
 * <p>It reports its restores on stdout, one line each, with wall-clock
 * milliseconds:
 *
 * <pre>
 * start MS
 * restore-start TOPIC-PARTITION FROM END MS
 * restore-end TOPIC-PARTITION RECORDS MS
 * restored RECORDS FIRST_START_MS LAST_END_MS   (once bench.partitions partitions ended)
 * </pre>
 *
 * <p>Configuration: {@code key=value} arguments, Kafka Streams properties
 * (prefix {@code restore.consumer.} and so on for a client's) and these:
 * {@code input.topic}, {@code output.topic}, {@code table.topic}; {@code
 * bench.partitions} (restores to wait for, default 4); {@code
 * bench.exit.after.restore} (true: close and exit once they ended); {@code
 * bench.rocksdb} (a {@link Rocks} profile). It runs until SIGTERM or SIGINT
 * otherwise; exit status 1 if a stream thread failed.
 */
public final class StateBench {
  private StateBench() {}

  /** The topology of mode, its topics and settings taken out of p. */
  static Topology topology(String mode, Properties p) {
    String input = take(p, "input.topic", "in");
    StreamsBuilder b = new StreamsBuilder();
    switch (mode) {
      case "restore" -> Topologies.restore(b, input);
      case "window" -> Topologies.window(b, input, need(p, "output.topic"),
          Long.parseLong(take(p, "bench.window.ms", "60000")), Long.parseLong(take(p, "bench.grace.ms", "10000")));
      case "join" -> Topologies.join(b, input, need(p, "table.topic"), need(p, "output.topic"),
          take(p, "bench.join.as", "profile"));
      default -> throw new IllegalArgumentException("bench.mode=" + mode + ": use restore, window or join");
    }
    // build(p): topology.optimization=all reuses a source table's topic as
    // its changelog
    return b.build(p);
  }

  private static String take(Properties p, String key, String def) {
    Object v = p.remove(key);
    return v == null ? def : v.toString();
  }

  private static String need(Properties p, String key) {
    Object v = p.remove(key);
    if (v == null) {
      throw new IllegalArgumentException(key + " is not set: the job writes (or reads) that topic");
    }
    return v.toString();
  }

  public static void main(String[] args) throws InterruptedException {
    long startMs = System.currentTimeMillis();
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("BENCH_BROKERS", "127.0.0.1:9092"));
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, env("BENCH_GROUP", "statebench"));
    p.put("input.topic", env("BENCH_INPUT", "in"));
    for (String a : args) {
      int eq = a.indexOf('=');
      if (eq <= 0) {
        System.err.println("streams-state: argument " + a + ": want key=value");
        System.exit(2);
      }
      p.put(a.substring(0, eq), a.substring(eq + 1));
    }
    String mode = take(p, "bench.mode", "restore");
    Topology topology;
    try {
      topology = topology(mode, p);
    } catch (IllegalArgumentException e) {
      System.err.println("streams-state: " + e.getMessage());
      System.exit(2);
      return;
    }
    int partitions = Integer.parseInt((String) p.getOrDefault("bench.partitions", "4"));
    boolean exitAfter = Boolean.parseBoolean((String) p.getOrDefault("bench.exit.after.restore", "false"));
    if (p.containsKey(Rocks.PROFILE)) {
      p.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, Rocks.class.getName());
    }
    System.out.println("start " + startMs);
    System.out.println("config bench.mode=" + mode + " " + new java.util.TreeMap<>(p));

    CountDownLatch stop = new CountDownLatch(1);
    AtomicInteger status = new AtomicInteger();
    Set<TopicPartition> ended = ConcurrentHashMap.newKeySet();
    AtomicLong firstStart = new AtomicLong(Long.MAX_VALUE);
    AtomicLong records = new AtomicLong();
    KafkaStreams streams = new KafkaStreams(topology, p);
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override
      public void onRestoreStart(TopicPartition tp, String store, long from, long end) {
        long now = System.currentTimeMillis();
        firstStart.accumulateAndGet(now, Math::min);
        System.out.println("restore-start " + tp + " " + from + " " + end + " " + now);
      }

      @Override
      public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

      @Override
      public void onRestoreEnd(TopicPartition tp, String store, long total) {
        long now = System.currentTimeMillis();
        System.out.println("restore-end " + tp + " " + total + " " + now);
        records.addAndGet(total);
        if (ended.add(tp) && ended.size() == partitions) {
          System.out.println("restored " + records.get() + " " + firstStart.get() + " " + now);
          if (exitAfter) {
            stop.countDown();
          }
        }
      }
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("streams-state: a stream thread failed, shutting down: " + e);
      status.set(1);
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.ERROR) {
        status.set(1);
        stop.countDown();
      }
    });
    Signal.handle(new Signal("TERM"), sig -> stop.countDown());
    Signal.handle(new Signal("INT"), sig -> stop.countDown());
    streams.start();
    stop.await();
    // leave the group, so that the next run's group is empty at once
    if (!streams.close(new KafkaStreams.CloseOptions().timeout(Duration.ofSeconds(30)).leaveGroup(true))) {
      System.err.println("streams-state: the Streams client did not close within 30s");
      status.compareAndSet(0, 1);
    }
    System.exit(status.get());
  }

  private static String env(String name, String def) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? def : v;
  }
}
