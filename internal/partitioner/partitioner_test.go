package partitioner

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"
)

// TestMurmur2KafkaVectors: the hashes Apache Kafka's own test of
// Utils.murmur2 pins (clients/src/test/java/org/apache/kafka/common/
// utils/UtilsTest.java, testMurmur2), as the signed ints Java returns,
// and the partitions its default partitioner derives from them
// (toPositive(hash) % n).
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, tt := range []struct {
		key  string
		hash int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(tt.key))); got != tt.hash {
			t.Errorf("murmur2(%q) = %d, Kafka's is %d", tt.key, got, tt.hash)
		}
		for _, n := range []int{1, 3, 7, 12, 64, 1000} {
			want := int32((int64(tt.hash) & 0x7fffffff) % int64(n))
			if got := Murmur2([]byte(tt.key), n); got != want {
				t.Errorf("Murmur2(%q, %d) = %d, Kafka's partitioner gives %d", tt.key, n, got, want)
			}
		}
	}
	// derived by hand from the vectors: toPositive(-790332482) is
	// 1357151166
	if got := Murmur2([]byte("foobar"), 10); got != 6 {
		t.Errorf(`Murmur2("foobar", 10) = %d, want 6`, got)
	}
}

// testKeys returns the keys the comparisons run on: empty and one-byte
// keys, every length up to 64 of random bytes, and keys like the ids
// records are usually keyed by. The random ones come from a fixed seed,
// so a failure repeats.
func testKeys() [][]byte {
	keys := [][]byte{{}, {0}, {0xff}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd")}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		k := make([]byte, i%65)
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		keys = append(keys, k)
	}
	for i := range 1000 {
		keys = append(keys, fmt.Appendf(nil, "user-%d", i), fmt.Appendf(nil, "%016x", rng.Uint64()))
	}
	return keys
}

var partitionCounts = []int{1, 2, 3, 7, 12, 64, 1000}

// partitionsUpTo returns 0..n-1, the partition list kafka-go's balancers
// take.
func partitionsUpTo(n int) []int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return parts
}

// TestMurmur2MatchesFranzGo: for thousands of keys and several partition
// counts, Murmur2 gives the partition franz-go's default partitioner
// (StickyKeyPartitioner with its Kafka hasher) and kafka-go's Murmur2
// balancer give.
func TestMurmur2MatchesFranzGo(t *testing.T) {
	franz := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range partitionCounts {
		parts := partitionsUpTo(n)
		for _, key := range testKeys() {
			got := Murmur2(key, n)
			if want := franz.Partition(&kgo.Record{Key: key}, n); int(got) != want {
				t.Fatalf("key %x of %d partitions: Murmur2 %d, franz-go %d", key, n, got, want)
			}
			if want := (kafka.Murmur2Balancer{Consistent: true}).Balance(kafka.Message{Key: key}, parts...); int(got) != want {
				t.Fatalf("key %x of %d partitions: Murmur2 %d, kafka-go's Murmur2Balancer %d", key, n, got, want)
			}
		}
	}
}

// TestFNV1aMatchesKafkaGoHash: FNV1a gives the partition kafka-go's Hash
// balancer (what fencepost placed keys with before murmur2) gives,
// franz-go's Sarama-compatible hasher with FNV-1a, and librdkafka's fnv1a
// partitioner as its source defines it (the hash as a signed number made
// non-negative, then its unsigned remainder: the same partition, as
// truncated division makes -(h % n) equal to |h| % n).
func TestFNV1aMatchesKafkaGoHash(t *testing.T) {
	sarama := kgo.SaramaCompatHasher(func(b []byte) uint32 {
		h := fnv.New32a()
		_, _ = h.Write(b)
		return h.Sum32()
	})
	librdkafka := func(key []byte, n int) int32 {
		h := int32(fnv1a(key))
		if h < 0 {
			h = -h // math.MinInt32 stays itself, read as 1<<31 below
		}
		return int32(uint32(h) % uint32(n))
	}
	for _, n := range partitionCounts {
		parts := partitionsUpTo(n)
		for _, key := range testKeys() {
			got := FNV1a(key, n)
			if want := (&kafka.Hash{}).Balance(kafka.Message{Key: key}, parts...); int(got) != want {
				t.Fatalf("key %x of %d partitions: FNV1a %d, kafka-go's Hash %d", key, n, got, want)
			}
			if want := sarama(key, n); int(got) != want {
				t.Fatalf("key %x of %d partitions: FNV1a %d, franz-go's SaramaCompatHasher %d", key, n, got, want)
			}
			if want := librdkafka(key, n); got != want {
				t.Fatalf("key %x of %d partitions: FNV1a %d, librdkafka's fnv1a %d", key, n, got, want)
			}
		}
	}
}

// TestCRC32MatchesConsistent: CRC32 gives the partition kafka-go's CRC32
// balancer in its librdkafka "consistent" mode gives, empty keys (all on
// partition 0) included.
func TestCRC32MatchesConsistent(t *testing.T) {
	for _, n := range partitionCounts {
		parts := partitionsUpTo(n)
		for _, key := range testKeys() {
			got := CRC32(key, n)
			if want := (kafka.CRC32Balancer{Consistent: true}).Balance(kafka.Message{Key: key}, parts...); int(got) != want {
				t.Fatalf("key %x of %d partitions: CRC32 %d, kafka-go's CRC32Balancer %d", key, n, got, want)
			}
		}
		if got := CRC32([]byte{}, n); got != 0 {
			t.Errorf("an empty key of %d partitions on %d, librdkafka's consistent puts it on 0", n, got)
		}
	}
	// the IEEE check value of CRC-32 is 0xcbf43926 = 3421780262
	if got := CRC32([]byte("123456789"), 1000); got != 262 {
		t.Errorf(`CRC32("123456789", 1000) = %d, want 262`, got)
	}
}

// TestByName: every name resolves to its placement, "" to Murmur2, and
// nothing else resolves.
func TestByName(t *testing.T) {
	key := []byte("user-42")
	for _, tt := range []struct {
		name string
		want Func
	}{{"", Murmur2}, {NameMurmur2, Murmur2}, {NameFNV1a, FNV1a}, {NameCRC32, CRC32}} {
		f, ok := ByName(tt.name)
		if !ok {
			t.Fatalf("ByName(%q) found nothing", tt.name)
		}
		for _, n := range partitionCounts {
			if f(key, n) != tt.want(key, n) {
				t.Errorf("ByName(%q) is not the placement of that name", tt.name)
			}
		}
	}
	for _, name := range []string{"Murmur2", "fnv", "crc", "random", "default", " murmur2"} {
		if _, ok := ByName(name); ok {
			t.Errorf("ByName(%q) found a placement", name)
		}
	}
	if got := Names(); !slices.Equal(got, []string{"murmur2", "fnv1a", "crc32"}) {
		t.Errorf("Names() = %v", got)
	}
	for _, name := range Names() {
		if _, ok := ByName(name); !ok {
			t.Errorf("Names lists %q, which ByName does not know", name)
		}
	}
}

// checkInRange fails t unless every placement puts key on a partition in
// [0, n), the same one each time.
func checkInRange(t interface {
	Helper()
	Fatalf(string, ...any)
}, key []byte, n int) {
	t.Helper()
	for _, name := range Names() {
		f, _ := ByName(name)
		p := f(key, n)
		if p < 0 || int(p) >= n {
			t.Fatalf("%s puts key %x on partition %d of %d", name, key, p, n)
		}
		if again := f(key, n); again != p {
			t.Fatalf("%s puts key %x on %d, then on %d", name, key, p, again)
		}
	}
}

// TestPartitionInRange: for any key and any partition count from 1 to
// the largest Kafka allows, every placement returns a partition in
// [0, n).
func TestPartitionInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		n := rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, math.MaxInt32),
			rapid.IntRange(math.MaxInt32-3, math.MaxInt32)).Draw(t, "partitions")
		checkInRange(t, key, n)
	})
}

// FuzzPartitionInRange: as TestPartitionInRange, from fuzzed keys and
// counts (folded into 1..math.MaxInt32).
func FuzzPartitionInRange(f *testing.F) {
	f.Fuzz(func(t *testing.T, key []byte, count uint32) {
		checkInRange(t, key, int(count%math.MaxInt32)+1)
	})
}
