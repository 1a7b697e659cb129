package dev.fencepost.bench.state;

import java.util.Map;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.Cache;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.WriteBufferManager;

/**
 * The RocksDB settings the tuning search tries, chosen by the property
 * {@code bench.rocksdb}:
 *
 * <ul>
 *   <li>{@code default}: Kafka Streams' own (the setter changes nothing);
 *   <li>{@code bulk}: for a write-heavy load such as a restore: memtables of
 *       {@code bench.rocksdb.write.buffer.mb} (default 64), up to 4 of them,
 *       and level-0 compaction later ({@code bench.rocksdb.l0.trigger},
 *       default 16 files; slowdown and stop above it), so fewer compactions
 *       rewrite the data while it arrives;
 *   <li>{@code bounded}: every store shares one block cache and one write
 *       buffer budget of {@code bench.rocksdb.bounded.mb} MB (default 64),
 *       the memtables counted against the cache, index and filter blocks in
 *       the cache: the memory-bounding setter Kafka Streams' documentation
 *       describes;
 *   <li>{@code bounded-bulk}: both.
 * </ul>
 */
public final class Rocks implements RocksDBConfigSetter {
  static final String PROFILE = "bench.rocksdb";

  private static Cache sharedCache;
  private static WriteBufferManager sharedWbm;

  private static synchronized void shared(long bytes) {
    if (sharedCache == null) {
      sharedCache = new LRUCache(bytes, -1, false, 0.1);
      sharedWbm = new WriteBufferManager(bytes / 2, sharedCache);
    }
  }

  private static int intOf(Map<String, Object> configs, String key, int def) {
    Object v = configs.get(key);
    return v == null ? def : Integer.parseInt(v.toString());
  }

  @Override
  public void setConfig(String storeName, Options options, Map<String, Object> configs) {
    String profile = String.valueOf(configs.getOrDefault(PROFILE, "default"));
    boolean bulk = profile.equals("bulk") || profile.equals("bounded-bulk");
    boolean bounded = profile.equals("bounded") || profile.equals("bounded-bulk");
    if (!bulk && !bounded && !profile.equals("default")) {
      throw new IllegalArgumentException(PROFILE + "=" + profile + ": use default, bulk, bounded or bounded-bulk");
    }
    if (bulk) {
      long mb = intOf(configs, "bench.rocksdb.write.buffer.mb", 64);
      int l0 = intOf(configs, "bench.rocksdb.l0.trigger", 16);
      options.setWriteBufferSize(mb << 20);
      options.setMaxWriteBufferNumber(4);
      options.setLevel0FileNumCompactionTrigger(l0);
      options.setLevel0SlowdownWritesTrigger(l0 * 3);
      options.setLevel0StopWritesTrigger(l0 * 4);
      options.setTargetFileSizeBase(mb << 20);
      options.setMaxBytesForLevelBase(l0 * (mb << 20));
    }
    if (bounded) {
      long bytes = (long) intOf(configs, "bench.rocksdb.bounded.mb", 64) << 20;
      shared(bytes);
      BlockBasedTableConfig table = (BlockBasedTableConfig) options.tableFormatConfig();
      table.setBlockCache(sharedCache);
      table.setCacheIndexAndFilterBlocks(true);
      table.setCacheIndexAndFilterBlocksWithHighPriority(true);
      table.setPinTopLevelIndexAndFilter(true);
      options.setTableFormatConfig(table);
      options.setWriteBufferManager(sharedWbm);
    }
  }

  @Override
  public void close(String storeName, Options options) {
    // the shared cache and write buffer manager outlive every store
  }
}
