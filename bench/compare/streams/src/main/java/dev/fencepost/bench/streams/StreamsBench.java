package dev.fencepost.bench.streams;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import sun.misc.Signal;

/**
 * The Kafka Streams peer of the real-pipeline benchmark: reads shop events,
 * keeps the purchases, reshapes them keyed by user and writes them to the
 * output topic (see {@link Reshape} and README.md).
 *
 * <p>It runs until SIGTERM or SIGINT, then closes the Streams client (which
 * commits what was processed) and exits with status 0; if a stream thread
 * fails (a bad event, a fatal Kafka error) it shuts the client down and
 * exits with status 1, the error on stderr.
 */
public final class StreamsBench {
  private StreamsBench() {}

  /** The topology: source, one flatMap (parse, filter, reshape, re-key), sink. */
  static Topology topology(String input, String output) {
    Reshape reshape = new Reshape();
    StreamsBuilder b = new StreamsBuilder();
    b.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
        .<String, byte[]>flatMap((key, value) -> {
          Reshape.Purchase p = reshape.apply(value);
          return p == null ? List.of() : List.of(KeyValue.pair(p.user(), p.value()));
        })
        .to(output, Produced.with(Serdes.String(), Serdes.ByteArray()));
    return b.build();
  }

  public static void main(String[] args) throws InterruptedException {
    Settings s;
    try {
      s = Settings.parse(args, System.getenv());
    } catch (Settings.UsageException e) {
      System.err.println("streams-bench: " + e.getMessage());
      System.err.println("usage: java -jar streams-bench.jar [-c FILE.properties] [key=value ...] (see README.md)");
      System.exit(2);
      return;
    }
    System.out.println(s.describe());
    CountDownLatch stop = new CountDownLatch(1);
    AtomicInteger status = new AtomicInteger();
    KafkaStreams streams = new KafkaStreams(topology(s.input, s.output), s.streams);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("streams-bench: a stream thread failed, shutting down: " + e);
      status.set(1);
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.ERROR) {
        status.set(1);
        stop.countDown();
      }
    });
    // Signal handlers rather than a shutdown hook: the JVM exits 143 after
    // its hooks run on SIGTERM; this way a clean stop exits 0.
    Signal.handle(new Signal("TERM"), sig -> stop.countDown());
    Signal.handle(new Signal("INT"), sig -> stop.countDown());
    streams.start();
    stop.await();
    if (!streams.close(Duration.ofSeconds(30))) {
      System.err.println("streams-bench: the Streams client did not close within 30s");
      status.compareAndSet(0, 1);
    }
    System.exit(status.get());
  }
}
