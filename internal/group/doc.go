// Package group is the engine's consumer-group member: the classic
// group protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetFetch, OffsetCommit) over kafka-go's protocol
// package, with static membership (KIP-345) and cooperative incremental
// rebalancing (KIP-429).
//
// A [Member] is driven by one goroutine, the one running [Member.Run]. It
// tells its owner what happens through [Member.Events]:
//
//   - [Assigned]: once per generation joined, with the partitions gained
//     and their committed offsets and leader epochs.
//   - [Revoke]: partitions to stop, drain and commit; the owner calls
//     [Revoke.Done] when it has, and the member heartbeats meanwhile. It
//     rejoins only after Done, so no other member is given a revoked
//     partition while its owner may still commit it.
//   - [Lost]: partitions taken away without a revoke (the session
//     expired, or the coordinator fenced the member); the owner stops
//     them and must not commit them. The member declares its partitions
//     lost itself when no heartbeat has been answered for the session
//     timeout (or the rebalance timeout, if shorter), which is no later
//     than the coordinator can remove it, so their next owner is assigned
//     them only after Lost was sent.
//
// [Member.Commit] commits offsets (OffsetCommit v7+, with the member's
// generation, member id, instance id and each offset's leader epoch) for
// partitions assigned to the member; a fenced commit returns an error
// wrapping offsets.ErrGenerationEnded.
//
// Assignors: [CooperativeSticky] (the default), [Range] and [RoundRobin],
// with the names and the subscription and assignment encoding (the
// ConsumerProtocol, v3: owned partitions, generation, rack) of Java's and
// franz-go's clients, so mixed groups work. With cooperative-sticky a
// rebalance moves only the partitions that must move: their owners revoke
// them after the first rebalance, and a second assigns them; every other
// partition stays with its member and keeps being processed. Range and
// roundrobin are eager: every rebalance revokes every partition first.
//
// Static membership: set [Config.InstanceID]. A static member that
// restarts within the session timeout gets its partitions back in the same
// generation, and nobody else rebalances. When Run ends a static member
// does not leave the group (its partitions wait a session timeout for it)
// unless [Config.LeaveOnClose] is set.
//
// The consumer group protocol (KIP-848, Kafka 4.0+): set
// [Config.Protocol] to [ProtocolConsumer]. One request,
// ConsumerGroupHeartbeat, joins, heartbeats and carries the assignment
// the coordinator computes (with [Config.RemoteAssignor], "uniform" or
// "range"); revocations are incremental by design, and the member
// acknowledges a revoke (by no longer listing the partitions it owns)
// only after Revoke.Done. A static member leaves with member epoch -2, so
// the coordinator keeps its assignment for the session timeout. Commits
// use OffsetCommit v9 with the member epoch; one refused as
// STALE_MEMBER_EPOCH because the coordinator moved the member to a new
// member epoch (Kafka before 4.3 accepts only the current one) is sent
// again under it while the member still owns the partitions. The same
// events and Commit serve both protocols.
//
// Exactly-once: set [Config.RequireStable] when input is read
// read_committed. Committed offsets are then fetched with OffsetFetch v7
// RequireStable (KIP-447): while a transaction of a partition's previous
// owner has its offset pending, the coordinator answers
// UNSTABLE_OFFSET_COMMIT and the member asks again, heartbeating, so
// [Assigned] never carries an offset a pending transaction is about to
// move.
//
// On the classic protocol the leader checks the subscribed topics'
// partition counts every Config.MetadataInterval and starts a rebalance
// when one changed, so added partitions are consumed without a restart.
//
// The member dials its own connections with Config.Dial, which provides
// TLS and SASL (the pipeline passes kafkawire.Dialer.DialNet).
package group
