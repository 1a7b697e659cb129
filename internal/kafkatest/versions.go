package kafkatest

import "github.com/twmb/franz-go/pkg/kmsg"

// Kafka4MinVersions are the oldest request versions Apache Kafka 4.x
// accepts, by request key; a key that is not listed accepts version 0.
// Kafka 4.0 removed the older versions (KIP-896); 4.1 made share groups
// stable and dropped their v0 preview. Produce is listed at 3 although
// 4.x still advertises 0 in ApiVersions (for old clients' version
// negotiation): it rejects produce requests below v3.
var Kafka4MinVersions = map[kmsg.Key]int16{
	kmsg.Produce:                 3,
	kmsg.Fetch:                   4,
	kmsg.ListOffsets:             1,
	kmsg.OffsetCommit:            2,
	kmsg.OffsetFetch:             1,
	kmsg.JoinGroup:               2,
	kmsg.CreateTopics:            2,
	kmsg.DeleteTopics:            1,
	kmsg.OffsetForLeaderEpoch:    2,
	kmsg.WriteTxnMarkers:         1,
	kmsg.DescribeACLs:            1,
	kmsg.CreateACLs:              1,
	kmsg.DeleteACLs:              1,
	kmsg.DescribeConfigs:         1,
	kmsg.AlterReplicaLogDirs:     1,
	kmsg.DescribeLogDirs:         1,
	kmsg.CreateDelegationToken:   1,
	kmsg.RenewDelegationToken:    1,
	kmsg.ExpireDelegationToken:   1,
	kmsg.DescribeDelegationToken: 1,
	kmsg.ShareGroupHeartbeat:     1,
	kmsg.ShareGroupDescribe:      1,
	kmsg.ShareFetch:              1,
	kmsg.ShareAcknowledge:        1,
}
