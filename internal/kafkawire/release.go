package kafkawire

import "fmt"

// metadataVersionReleases maps the highest KRaft metadata.version level a
// broker supports (ApiVersions v3+, SupportedFeatures) to the Apache Kafka
// release that made it the latest production level, from Kafka's
// MetadataVersion enum: 1 is 3.0-IV1, 7 is 3.3-IV3, 14 is 3.6-IV2, 19 is
// 3.7-IV4, 20 is 3.8-IV0, 21 is 3.9-IV0, 25 is 4.0-IV3, 27 is 4.1-IV1.
// Each entry is the last level of its release.
var metadataVersionReleases = []struct {
	last    int16
	release string
}{
	{1, "3.0"}, {2, "3.1"}, {3, "3.2"}, {7, "3.3"}, {8, "3.4"}, {11, "3.5"},
	{14, "3.6"}, {19, "3.7"}, {20, "3.8"}, {21, "3.9"}, {25, "4.0"}, {27, "4.1"},
}

// ReleaseOfMetadataVersion names the Apache Kafka release of a broker
// whose highest supported metadata.version level is level, as "Apache
// Kafka 3.9 (metadata.version 21)". A level above the table's last
// release is named as later than it; a level below 1 (no KRaft metadata
// version: a ZooKeeper-mode broker) returns "".
func ReleaseOfMetadataVersion(level int16) string {
	if level < 1 {
		return ""
	}
	for _, r := range metadataVersionReleases {
		if level <= r.last {
			return fmt.Sprintf("Apache Kafka %s (metadata.version %d)", r.release, level)
		}
	}
	last := metadataVersionReleases[len(metadataVersionReleases)-1]
	return fmt.Sprintf("Apache Kafka later than %s (metadata.version %d)", last.release, level)
}
