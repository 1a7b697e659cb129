// Package partitioner places keyed records on partitions the way other
// Kafka clients do, so that a key written by fencepost and by another
// producer of the same topic lands on the same partition, and a consumer
// (or a Kafka Streams join) finds every record of a key in one place.
//
// Each placement takes a record's key and the topic's partition count n,
// from 1 to math.MaxInt32, and returns a partition in [0, n). The key may
// be empty; the producers never call a placement for a nil key (records
// without a key are spread over the partitions instead, whatever the
// placement).
package partitioner

import (
	"encoding/binary"
	"hash/crc32"
)

// Func places a key on one of n partitions (see the package
// documentation).
type Func func(key []byte, n int) int32

// The names of the placements, as the configuration spells them
// (kafka.partitioner).
const (
	// NameMurmur2 is Murmur2's name: the default.
	NameMurmur2 = "murmur2"
	// NameFNV1a is FNV1a's name.
	NameFNV1a = "fnv1a"
	// NameCRC32 is CRC32's name.
	NameCRC32 = "crc32"
)

// Names returns the names ByName knows, the default first.
func Names() []string { return []string{NameMurmur2, NameFNV1a, NameCRC32} }

// ByName returns the placement called name, and whether there is one;
// "" is the default, Murmur2.
func ByName(name string) (Func, bool) {
	switch name {
	case "", NameMurmur2:
		return Murmur2, true
	case NameFNV1a:
		return FNV1a, true
	case NameCRC32:
		return CRC32, true
	}
	return nil, false
}

// Murmur2 places key where the Java producer's default partitioner does,
// and with it Kafka Streams, ksqlDB, Kafka Connect, franz-go's default
// partitioner and librdkafka's murmur2 and murmur2_random: the 32-bit
// MurmurHash2 of the key (seed 0x9747b28c), its sign bit cleared,
// modulo n.
func Murmur2(key []byte, n int) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(n))
}

// FNV1a places key where kafka-go's Hash balancer does, which is where
// fencepost placed keyed records up to version 0.1: the 32-bit FNV-1a
// hash of the key read as a signed number, its remainder by n, negated
// when negative. Sarama's default hash partitioner and librdkafka's
// fnv1a put a key on the same partition.
func FNV1a(key []byte, n int) int32 {
	p := int32(fnv1a(key)) % int32(n)
	if p < 0 {
		p = -p
	}
	return p
}

// CRC32 places key where librdkafka's consistent partitioner does: the
// CRC-32 (IEEE) of the key, unsigned, modulo n. The CRC of an empty key
// is 0, so every empty key lands on partition 0, as there.
func CRC32(key []byte, n int) int32 {
	return int32(crc32.ChecksumIEEE(key) % uint32(n))
}

// murmur2 is the 32-bit MurmurHash2 with the seed Kafka's clients use.
// It reads the key four bytes at a time, little-endian, mixes each word
// into the hash, folds in the one to three bytes left over, and
// scrambles the result.
func murmur2(key []byte) uint32 {
	const (
		seed = 0x9747b28c
		mul  = 0x5bd1e995 // the mixing multiplier
		rot  = 24         // the shift that spreads a word's high bits
	)
	h := seed ^ uint32(len(key))
	for ; len(key) >= 4; key = key[4:] {
		w := binary.LittleEndian.Uint32(key)
		w *= mul
		w ^= w >> rot
		w *= mul
		h = h*mul ^ w
	}
	if tail := len(key); tail > 0 {
		if tail == 3 {
			h ^= uint32(key[2]) << 16
		}
		if tail >= 2 {
			h ^= uint32(key[1]) << 8
		}
		h ^= uint32(key[0])
		h *= mul
	}
	h ^= h >> 13
	h *= mul
	h ^= h >> 15
	return h
}

// fnv1a is the 32-bit FNV-1a hash (the standard library's hash/fnv
// New32a, without its allocation).
func fnv1a(key []byte) uint32 {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for _, b := range key {
		h ^= uint32(b)
		h *= prime
	}
	return h
}
