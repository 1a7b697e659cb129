package dev.fencepost.bench.state;

import java.time.Duration;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The three jobs of the state benchmarks (bench/cmd/statebench), each the
 * way a Kafka Streams user writes it with the DSL. Every store is RocksDB
 * with a changelog, Kafka Streams' defaults.
 */
final class Topologies {
  private Topologies() {}

  /**
   * restore: counts the input's records per key in the store "counts"
   * ({@code groupByKey().count()}); its changelog is the one both engines
   * restore.
   */
  static void restore(StreamsBuilder b, String input) {
    b.stream(input, Consumed.with(Serdes.Bytes(), Serdes.ByteArray()))
        .groupByKey(Grouped.with(Serdes.Bytes(), Serdes.ByteArray()))
        .count(Materialized.<Bytes, Long, KeyValueStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.Bytes()).withValueSerde(Serdes.Long()));
  }

  /**
   * window: counts the input's records per key in tumbling windows of the
   * record timestamps, and writes each window's count once, when it closes
   * (stream time reaches its end plus the grace). The output's key is the
   * record key and the window's start (Kafka Streams' time-windowed serde:
   * the key's bytes, then 8 bytes of start), its value the count (8 bytes,
   * big-endian).
   */
  static void window(StreamsBuilder b, String input, String output, long sizeMs, long graceMs) {
    b.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(sizeMs), Duration.ofMillis(graceMs)))
        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final"))
        .toStream()
        .to(output, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, sizeMs), Serdes.Long()));
  }

  /**
   * join: an inner KStream-KTable join of the input (JSON objects keyed by
   * user) with the table topic (a JSON row per user, keyed the same way):
   * each input record whose key has a row is written with the row added
   * under {@code as} (see {@link Enrich}); the others are dropped.
   */
  static void join(StreamsBuilder b, String input, String table, String output, String as) {
    KTable<String, byte[]> users = b.table(table, Consumed.with(Serdes.String(), Serdes.ByteArray()),
        Materialized.<String, byte[], KeyValueStore<Bytes, byte[]>>as("users")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.ByteArray()));
    Enrich enrich = new Enrich(as);
    b.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .join(users, enrich::apply)
        .to(output, Produced.with(Serdes.String(), Serdes.ByteArray()));
  }
}
