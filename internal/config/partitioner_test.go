package config

import (
	"cmp"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// TestPartitioner: kafka.partitioner loads as written (left out: empty,
// which is murmur2), and an unknown name is reported at its key, with
// the valid names.
func TestPartitioner(t *testing.T) {
	withPartitioner := func(v string) string {
		return strings.Replace(base, "  brokers: [localhost:9092]\n", "  brokers: [localhost:9092]\n  partitioner: "+v+"\n", 1)
	}
	checkCases(t, []errorCase{
		{"unknown partitioner", withPartitioner("murmur2_random"),
			[]want{{"3:3", "kafka.partitioner", `"murmur2_random" is not a partitioner: use murmur2 (the default), fnv1a or crc32`}},
			"fnv1a (kafka-go's Hash balancer"},
		{"partitioner of the wrong type", withPartitioner("[fnv1a]"),
			[]want{{"3:16", "kafka.partitioner", "want a string, found a list"}}, ""},
	})
	for _, c := range []struct {
		src  string
		want pipeline.Partitioner
	}{
		{base, ""},
		{withPartitioner("murmur2"), pipeline.PartitionerMurmur2},
		{withPartitioner("fnv1a"), pipeline.PartitionerFNV1a},
		{withPartitioner("crc32"), pipeline.PartitionerCRC32},
	} {
		cfg, errs := parse(t, c.src, nil)
		if errs != nil {
			t.Fatal(errs)
		}
		if got := cfg.Pipeline.Kafka.Partitioner; got != c.want {
			t.Errorf("partitioner %q, want %q", got, c.want)
		}
		if got := cfg.Pipeline.WithDefaults().Kafka.Partitioner; got != cmp.Or(c.want, pipeline.PartitionerMurmur2) {
			t.Errorf("partitioner %q with the defaults", got)
		}
	}
}
