package kafkawire

import "testing"

// The levels are those Kafka's MetadataVersion enum gives each release's
// latest production version (4.1.1's enum, printed with featureLevel()),
// and the ones real 3.7.2 and 3.9.1 brokers report (19, 21).
func TestReleaseOfMetadataVersion(t *testing.T) {
	for _, tc := range []struct {
		level int16
		want  string
	}{
		{0, ""},
		{-1, ""},
		{1, "Apache Kafka 3.0 (metadata.version 1)"},
		{7, "Apache Kafka 3.3 (metadata.version 7)"},
		{14, "Apache Kafka 3.6 (metadata.version 14)"},
		{15, "Apache Kafka 3.7 (metadata.version 15)"},
		{19, "Apache Kafka 3.7 (metadata.version 19)"},
		{20, "Apache Kafka 3.8 (metadata.version 20)"},
		{21, "Apache Kafka 3.9 (metadata.version 21)"},
		{22, "Apache Kafka 4.0 (metadata.version 22)"},
		{25, "Apache Kafka 4.0 (metadata.version 25)"},
		{27, "Apache Kafka 4.1 (metadata.version 27)"},
		{28, "Apache Kafka later than 4.1 (metadata.version 28)"},
	} {
		if got := ReleaseOfMetadataVersion(tc.level); got != tc.want {
			t.Errorf("ReleaseOfMetadataVersion(%d) = %q, want %q", tc.level, got, tc.want)
		}
	}
}
