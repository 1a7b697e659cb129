package dev.fencepost.bench.streams;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.Test;

public class SettingsTest {
  @Test
  public void defaultsAreTheOtherEnginesAndStreamsOwn() throws Exception {
    Settings s = Settings.parse(new String[0], Map.of());
    assertEquals("events", s.input);
    assertEquals("purchases", s.output);
    assertEquals("127.0.0.1:9092", s.streams.getProperty("bootstrap.servers"));
    assertEquals("bench", s.streams.getProperty("application.id"));
    assertNull(s.streams.getProperty("processing.guarantee"));
    assertFalse("the topics are not Streams properties", s.streams.containsKey(Settings.INPUT));
  }

  @Test
  public void fileThenEnvironmentThenArguments() throws Exception {
    Path f = Files.createTempFile("streams-bench", ".properties");
    try {
      Files.writeString(f, "processing.guarantee=exactly_once_v2\ncommit.interval.ms=100\nnum.stream.threads=2\n"
          + "output.topic=from-file\nsasl.jaas.config=secret-value\n");
      Settings s = Settings.parse(new String[] {"-c", f.toString(), "num.stream.threads=4"},
          Map.of("BENCH_BROKERS", "h:1", "BENCH_GROUP", "g", "BENCH_INPUT", "in", "STREAMS_COMMIT_INTERVAL_MS", "50",
              "STREAMS_NUM_STREAM_THREADS", "3", "STREAMS_PRODUCER_LINGER_MS", "5"));
      assertEquals("in", s.input);
      assertEquals("from-file", s.output);
      assertEquals("h:1", s.streams.getProperty("bootstrap.servers"));
      assertEquals("g", s.streams.getProperty("application.id"));
      assertEquals("exactly_once_v2", s.streams.getProperty("processing.guarantee"));
      assertEquals("50", s.streams.getProperty("commit.interval.ms"));
      assertEquals("4", s.streams.getProperty("num.stream.threads"));
      assertEquals("5", s.streams.getProperty("producer.linger.ms"));
      String d = s.describe();
      assertTrue(d, d.contains("num.stream.threads=4") && d.contains("producer.batch.size=(Kafka Streams default)"));
      assertTrue(d, d.contains("also set: sasl.jaas.config") && !d.contains("secret-value"));
    } finally {
      Files.delete(f);
    }
  }

  @Test
  public void rejectsAnUnknownGuaranteeAndArgument() {
    Settings.UsageException e = assertThrows(Settings.UsageException.class,
        () -> Settings.parse(new String[0], Map.of("STREAMS_PROCESSING_GUARANTEE", "exactly_once")));
    assertTrue(e.getMessage(), e.getMessage().contains("want at_least_once or exactly_once_v2"));
    assertThrows(Settings.UsageException.class, () -> Settings.parse(new String[] {"--fast"}, Map.of()));
    assertThrows(Settings.UsageException.class, () -> Settings.parse(new String[] {"-c"}, Map.of()));
  }
}
