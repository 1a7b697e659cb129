package group

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// Errors the member returns wrapped with details; test with errors.Is.
var (
	// ErrConfig: the Config is invalid; the message says which field.
	ErrConfig = errors.New("invalid group member configuration")
	// ErrUnsupportedBroker: the broker does not speak a request version
	// the member needs (Kafka 2.4 or later is required).
	ErrUnsupportedBroker = errors.New("broker too old for the group member")
	// ErrFencedInstance: another process joined the group with this
	// member's group instance id (FENCED_INSTANCE_ID). Run returns it:
	// two processes must never share an instance id.
	ErrFencedInstance = errors.New("another member uses this group instance id")
	// ErrConsumerProtocolUnsupported: Protocol is ProtocolConsumer and
	// the group coordinator does not offer the consumer group protocol
	// (KIP-848: Kafka 4.0 or later): it lacks ConsumerGroupHeartbeat, or
	// refuses it with UNSUPPORTED_VERSION. Run returns it at the first
	// join; the message names the broker's release when it can tell.
	ErrConsumerProtocolUnsupported = errors.New("the brokers do not offer the consumer group protocol (KIP-848)")
)

// Group protocols (Config.Protocol).
const (
	ProtocolClassic  = "classic"
	ProtocolConsumer = "consumer"
)

// DialFunc opens a connection to a broker (host:port), ready for
// requests: TLS and SASL, if the cluster needs them, are its job
// (kafkawire.Dialer.DialNet does both, as for the fetch path).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config configures a Member. Zero durations take the defaults noted.
type Config struct {
	// Brokers are bootstrap addresses (host:port); the group coordinator
	// is found through them.
	Brokers []string
	// Group is the consumer group id.
	Group string
	// Topics are the topics the member subscribes to.
	Topics []string
	// InstanceID, if set, makes the member static (KIP-345): it keeps
	// its partitions across a restart within SessionTimeout, with no
	// rebalance for the others, and it does not leave the group when Run
	// ends unless LeaveOnClose is set. It must be unique in the group
	// (a StatefulSet pod name, for example).
	InstanceID string
	// LeaveOnClose makes a static member send LeaveGroup when Run ends,
	// so its partitions move at once instead of after SessionTimeout.
	// Dynamic members always leave.
	LeaveOnClose bool
	// Assignors are the assignors this member supports, preferred first
	// (CooperativeSticky, Range, RoundRobin); the group uses the first
	// every member supports. Default: CooperativeSticky alone.
	Assignors []string
	// Protocol is the group protocol: ProtocolClassic (the default:
	// JoinGroup, SyncGroup, Heartbeat, client-side assignors) or
	// ProtocolConsumer (KIP-848, Kafka 4.0+: ConsumerGroupHeartbeat,
	// assignment computed by the coordinator, always incremental).
	Protocol string
	// RemoteAssignor is the coordinator-side assignor the consumer
	// protocol asks for ("uniform" or "range"); empty: the broker's
	// default. Ignored by the classic protocol.
	RemoteAssignor string
	// Rack is sent in the subscription (v3) for rack-aware assignors.
	Rack string
	// SessionTimeout: the coordinator removes a member it has not heard
	// from for this long. Default 45s. With the consumer protocol the
	// broker sets it (group.consumer.session.timeout.ms); set this to the
	// same value, as the member declares its partitions lost by it.
	SessionTimeout time.Duration
	// RebalanceTimeout: how long the coordinator waits for every member
	// to rejoin in a rebalance; it bounds how long a Revoke may take to
	// drain. Default 60s.
	RebalanceTimeout time.Duration
	// HeartbeatInterval: how often the member heartbeats. Default 3s;
	// it must be below SessionTimeout.
	HeartbeatInterval time.Duration
	// MetadataInterval: how often the group's leader checks the
	// subscribed topics, starting a rebalance when one appeared, was
	// deleted, changed its partition count or was deleted and created
	// again (its topic id changed) (classic protocol; the consumer
	// protocol's coordinator does it itself). Default 30s.
	MetadataInterval time.Duration
	// RetryBackoff: the pause before retrying a failed join, or an
	// offset fetch answered UNSTABLE_OFFSET_COMMIT (see RequireStable).
	// Default 250ms.
	RetryBackoff time.Duration
	// RequireStable makes the member read a partition's committed offset
	// only once no transaction has an offset for the group pending
	// (OffsetFetch v7 RequireStable, KIP-447). A transactional producer
	// commits the previous owner's offsets with TxnOffsetCommit; until its
	// transaction ends and the markers reach __consumer_offsets, the
	// coordinator still answers the old offset, and a new owner starting
	// from it would process records again. With RequireStable the
	// coordinator answers UNSTABLE_OFFSET_COMMIT instead, and the member
	// asks again every RetryBackoff, heartbeating meanwhile, for up to
	// RebalanceTimeout before it gives the partitions back (classic) or
	// retries the assignment (consumer protocol); Assigned is sent only
	// with stable offsets. Set it when input is read read_committed
	// (exactly-once). It needs Kafka 2.5 or later: an older coordinator
	// makes Run return an error wrapping ErrUnsupportedBroker.
	RequireStable bool
	// ClientID is sent with every request. Default "fencepost".
	ClientID string
	// Dial connects to brokers, with TLS and SASL as the cluster needs.
	// Default: plain TCP with a 10s timeout.
	Dial DialFunc
	// Logger receives the member's logs. Default: none.
	Logger *zap.Logger
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Brokers) == 0 {
		return c, fmt.Errorf("%w: Brokers is empty (set kafka.brokers)", ErrConfig)
	}
	if c.Group == "" {
		return c, fmt.Errorf("%w: Group is empty (set consumer.group)", ErrConfig)
	}
	if len(c.Topics) == 0 {
		return c, fmt.Errorf("%w: Topics is empty (set consumer.topics)", ErrConfig)
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolClassic
	case ProtocolClassic, ProtocolConsumer:
	default:
		return c, fmt.Errorf("%w: Protocol %q (use %q or %q)", ErrConfig, c.Protocol, ProtocolClassic, ProtocolConsumer)
	}
	switch c.RemoteAssignor {
	case "", "uniform", "range":
	default:
		return c, fmt.Errorf("%w: RemoteAssignor %q (use uniform or range)", ErrConfig, c.RemoteAssignor)
	}
	if len(c.Assignors) == 0 {
		c.Assignors = []string{CooperativeSticky}
	}
	for _, a := range c.Assignors {
		if _, err := assignorFor(a); err != nil {
			return c, err
		}
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.RebalanceTimeout <= 0 {
		c.RebalanceTimeout = 60 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 3 * time.Second
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return c, fmt.Errorf("%w: HeartbeatInterval %v must be below SessionTimeout %v", ErrConfig, c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.MetadataInterval <= 0 {
		c.MetadataInterval = 30 * time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 250 * time.Millisecond
	}
	if c.ClientID == "" {
		c.ClientID = "fencepost"
	}
	if c.Dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		c.Dial = d.DialContext
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c, nil
}
