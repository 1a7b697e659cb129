package pipeline

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencepost-dev/fencepost/internal/kafkaauth"
	"github.com/fencepost-dev/fencepost/internal/limits"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Config configures a Pipeline. Its YAML keys are the configuration
// file's; the zero value of every field but Kafka.Brokers, Consumer.Group
// and Consumer.Topics is a useful default (see each field). Call Validate
// to check it; New does.
type Config struct {
	Kafka      KafkaConfig      `yaml:"kafka"`
	Consumer   ConsumerConfig   `yaml:"consumer"`
	DeadLetter DeadLetterConfig `yaml:"dead_letter"`
	// ShutdownTimeout bounds a graceful stop: finish in-flight records,
	// commit, leave the group. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Guarantee is what a crash or rebalance may do to the output:
	// AtLeastOnce (the default) repeats up to a commit interval of
	// records; ExactlyOnce writes every output record and its source
	// offset in one Kafka transaction per commit interval, so nothing is
	// repeated or lost in the output topics (read them read_committed).
	Guarantee Guarantee `yaml:"guarantee"`
	// TransactionTimeout is how long the broker lets one of our
	// transactions stay open before it aborts it (a crashed instance's
	// open transaction blocks read_committed readers of its partitions
	// until then). ExactlyOnce only. Default 10s, as Kafka Streams under
	// exactly-once; at least 4 × Consumer.CommitInterval, and at most the
	// brokers' transaction.max.timeout.ms (15 minutes by default, which
	// Validate enforces).
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`
	// State is where stateful stages keep their stores (ignored without
	// them).
	State StateConfig `yaml:"state"`
}

// DefaultTransactionTimeout is transaction_timeout's default: how long a
// crashed instance's open transaction may hold read_committed readers back.
// Kafka Streams sets its producers' transaction.timeout.ms to 10s under
// exactly-once for the same reason.
const DefaultTransactionTimeout = 10 * time.Second

// BrokerTransactionMaxTimeout is the brokers' default
// transaction.max.timeout.ms: they refuse a longer transaction timeout.
const BrokerTransactionMaxTimeout = 15 * time.Minute

// commitIntervalsPerTxnTimeout: a commit interval may be at most this
// part of transaction_timeout (see Validate).
const commitIntervalsPerTxnTimeout = 4

// Guarantee is the delivery guarantee of a pipeline's output.
type Guarantee string

const (
	// AtLeastOnce commits a record's offset only after its outputs were
	// acknowledged: a crash repeats the records processed since the
	// last commit (at most about a commit interval of them). The
	// default.
	AtLeastOnce Guarantee = "at_least_once"
	// ExactlyOnce writes outputs and dead letters in a Kafka transaction
	// with the consumed offsets (KIP-447), one transaction per commit
	// interval. Input is read read_committed. Outputs become visible to
	// read_committed readers when their transaction commits, up to a
	// commit interval after they are produced. Stages whose effects go
	// elsewhere than their output records and the pipeline's producers
	// (stdout, a Go stage's own calls) stay at-least-once.
	ExactlyOnce Guarantee = "exactly_once"
)

// KafkaConfig says how to reach the cluster.
type KafkaConfig struct {
	// Brokers are bootstrap addresses, host:port. Required.
	Brokers  []string `yaml:"brokers"`
	ClientID string   `yaml:"client_id"` // default "fencepost"
	TLS      *TLS     `yaml:"tls"`
	SASL     *SASL    `yaml:"sasl"`
	// DialTimeout bounds connecting to a broker, TLS and SASL included.
	// Default 10s. This and every duration Kafka carries in milliseconds
	// (MetadataMaxAge, FetchMaxWait, SessionTimeout, HeartbeatInterval,
	// RebalanceTimeout) must be whole milliseconds, at most
	// 596h31m23.647s (int32 milliseconds).
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// MetadataMaxAge is how old the cached partition leaders may get.
	// A NotLeader answer refreshes them at once. Default 5s.
	MetadataMaxAge time.Duration `yaml:"metadata_max_age"`
	// CreateTopics creates the output and dead-letter topics that do not
	// exist at start, with the broker's default partition count and
	// replication factor. Off by default: a missing output topic fails
	// the start with an error naming it. Consumed topics are never
	// created.
	CreateTopics bool `yaml:"create_topics"`
	// MaxBatchBytes bounds one record batch written to an output or
	// dead-letter topic, and so the largest record (Kafka refuses a
	// batch over the topic's max.message.bytes). Left out (or 0): each
	// topic's max.message.bytes, read at its first write (1MiB, Kafka's
	// default, when it cannot be read: no DescribeConfigs permission).
	// Set it to write records larger than that default where the
	// topic's configuration cannot be read, or to refuse records
	// smaller than the topic allows. A record over the limit is refused
	// before anything is sent and dead-lettered (truncated: the dead
	// letter keeps the key, error and headers, not the value). From
	// 1KiB to 1GiB.
	MaxBatchBytes ByteSize `yaml:"max_batch_bytes"`
	// Partitioner places the records with a key written to output and
	// dead-letter topics: PartitionerMurmur2 (the default, where the
	// Java producer, Kafka Streams, ksqlDB, Kafka Connect and franz-go
	// put a key), PartitionerFNV1a (where kafka-go's Hash balancer, and
	// fencepost up to 0.1, put it) or PartitionerCRC32 (librdkafka's
	// consistent partitioner). Records without a key are spread over
	// the partitions whatever it says: those of one Produce call go to
	// one partition, the next call's to the next.
	Partitioner Partitioner `yaml:"partitioner"`
}

// Partitioner names how a producer places keyed records on partitions
// (KafkaConfig.Partitioner). The zero value is PartitionerMurmur2.
type Partitioner string

const (
	// PartitionerMurmur2 puts a key on partition (murmur2(key) &
	// 0x7fffffff) % partitions, as the Java producer's default
	// partitioner does, and with it Kafka Streams, ksqlDB, Kafka
	// Connect, franz-go's default partitioner and librdkafka's murmur2
	// and murmur2_random. The default.
	PartitionerMurmur2 Partitioner = "murmur2"
	// PartitionerFNV1a puts a key where kafka-go's Hash balancer does
	// (FNV-1a 32 of the key, read as a signed number, its remainder by
	// the partition count made non-negative), and so Sarama's default
	// hash partitioner and librdkafka's fnv1a: where fencepost up to 0.1
	// put keys, for topics whose readers rely on that placement.
	PartitionerFNV1a Partitioner = "fnv1a"
	// PartitionerCRC32 puts a key where librdkafka's consistent
	// partitioner does: crc32(key) % partitions (CRC-32 IEEE, unsigned);
	// an empty key on partition 0.
	PartitionerCRC32 Partitioner = "crc32"
)

// Validate reports whether p names a partitioner (or is empty, the
// default); the error lists the valid names.
func (p Partitioner) Validate() error {
	if _, ok := partitioner.ByName(string(p)); !ok {
		return fmt.Errorf("%q is not a partitioner: use %s (the default), %s or %s",
			string(p), PartitionerMurmur2, PartitionerFNV1a, PartitionerCRC32)
	}
	return nil
}

// place returns the placement p names (Murmur2 for the zero value); p
// must be valid.
func (p Partitioner) place() partitioner.Func {
	f, ok := partitioner.ByName(string(p))
	if !ok {
		panic(fmt.Sprintf("pipeline: unvalidated partitioner %q", string(p)))
	}
	return f
}

// TLS enables TLS to the brokers.
type TLS struct {
	// CAFile is a PEM bundle of CAs to trust; empty means the system
	// roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the broker certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables certificate checks (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL authenticates to the brokers.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	Password  Secret `yaml:"password"`
}

// Secret is a string that never prints: String, Format and logs show
// "[redacted]". Use string(s) where the value is needed.
type Secret string

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return s.String() }

// Format implements fmt.Formatter so %v, %s, %q and %#v all redact.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// MarshalText redacts, so a marshalled configuration never leaks it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Secret) UnmarshalText(b []byte) error { *s = Secret(b); return nil }

// Ordering is what the pipeline keeps in order.
type Ordering string

const (
	// OrderByPartition processes a partition's records one batch at a
	// time, in offset order. The default.
	OrderByPartition Ordering = "partition"
	// OrderByKey keeps order only among records with the same key:
	// records of one partition with different keys run concurrently.
	OrderByKey Ordering = "key"
)

// ConsumerConfig says what to consume and how.
type ConsumerConfig struct {
	// Group is the consumer group id. Required.
	Group string `yaml:"group"`
	// Topics to consume. Required; each a valid Kafka topic name.
	Topics []string `yaml:"topics"`
	// AutoOffsetReset applies when a partition has no valid committed
	// offset: earliest (default), latest, or none (stop that partition
	// with an error).
	AutoOffsetReset offsetstore.ResetPolicy `yaml:"auto_offset_reset"`
	// SkipOffsetValidation starts from committed offsets without first
	// checking them against the log bounds; an out-of-range offset is
	// then caught by the first fetch instead.
	SkipOffsetValidation bool `yaml:"skip_offset_validation"`
	// CommitInterval is the least time between two commits. The
	// processed watermark is committed as soon as it moves, with at most
	// one commit in flight and at most one commit per CommitInterval; it
	// is also committed on revoke and shutdown. Default 100ms: a crash
	// repeats about that much work, and each member writes at most ten
	// commits a second to __consumer_offsets (one record per partition
	// whose offset moved).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// FetchMaxWait is how long a broker may hold a fetch for data.
	// Default 500ms.
	FetchMaxWait time.Duration `yaml:"fetch_max_wait"`
	// FetchMinBytes a broker waits for before answering. Default 1.
	FetchMinBytes ByteSize `yaml:"fetch_min_bytes"`
	// FetchMaxBytes caps one fetch response. Default 50MiB.
	FetchMaxBytes ByteSize `yaml:"fetch_max_bytes"`
	// FetchConcurrency is how many fetch requests may be in flight to
	// one broker at once (1 to 16), each for a different share of its
	// partitions; responses are decoded in parallel. 0 (the default)
	// chooses at start from the consumed topics' partitions: 1 while
	// every broker leads fewer than 16 of them, else 2. The default is
	// not chosen again on rebalances.
	FetchConcurrency int `yaml:"fetch_concurrency"`
	// MaxPartitionFetchBytes caps one partition's share of a fetch
	// response. Default 1MiB.
	MaxPartitionFetchBytes ByteSize `yaml:"max_partition_fetch_bytes"`
	// BufferBytes is the budget for fetched-but-unfinished records: the
	// memory they hold, payload plus about 130 bytes of bookkeeping per
	// record. A full budget pauses fetching; a fetch reserves what it
	// may return. A record larger than what is left still gets through
	// (Kafka returns a partition's first batch whatever its size), so the
	// total can pass the budget by one record per fetch in flight until
	// it is processed. Default 16MiB (see docs/operations.md, "Sizing", for why not more).
	BufferBytes ByteSize `yaml:"buffer_bytes"`
	// Ordering is partition (default) or key.
	Ordering Ordering `yaml:"ordering"`
	// Concurrency is the most batches processed at once, up to 10000.
	// Default GOMAXPROCS.
	Concurrency int `yaml:"concurrency"`
	// ProcessingTimeout bounds one stage call on a batch (or, once
	// failures are isolated, on one record). A call still running then
	// has its context cancelled and counts as failed: its records are
	// run one by one, and the one that keeps failing is retried, then
	// dead-lettered or stops its partition, so a hanging stage cannot
	// wedge a partition silently. Default 1m.
	ProcessingTimeout time.Duration `yaml:"processing_timeout"`
	// ReadCommitted reads only committed transactional records
	// (isolation.level=read_committed): fetches skip aborted
	// transactions, and "latest" is the last stable offset (where the
	// oldest open transaction starts), not the high watermark. Default
	// read_uncommitted.
	ReadCommitted bool `yaml:"read_committed"`
	// SessionTimeout: the group evicts a member silent for this long.
	// Default 30s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval: how often the member heartbeats. Default 3s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RebalanceTimeout: how long the group waits for members to rejoin
	// during a rebalance; in-flight work is drained within it. Default
	// 30s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// GroupInstanceID makes this member static (KIP-345): a member that
	// restarts within SessionTimeout gets its partitions back with no
	// rebalance for anyone else, and a static member does not leave the
	// group when it stops (see LeaveGroupOnClose). It must be unique in
	// the group and stable across restarts: on Kubernetes, a
	// StatefulSet pod's name (`group_instance_id: "${HOSTNAME}"`).
	// Empty (the default): a dynamic member.
	GroupInstanceID string `yaml:"group_instance_id"`
	// LeaveGroupOnClose makes a static member leave the group when it
	// stops, so its partitions move at once instead of after
	// SessionTimeout: for scaling down, or a restart that takes long.
	// Dynamic members always leave.
	LeaveGroupOnClose bool `yaml:"leave_group_on_close"`
	// Assignor is how the group's leader assigns partitions:
	// cooperative-sticky (the default: a rebalance moves as few
	// partitions as it can, and only those stop), range or roundrobin
	// (eager: every rebalance stops every partition of every member).
	// Each is wire-compatible with the Java and franz-go assignor of the
	// same name. With cooperative-sticky the member also offers range,
	// so it can join a group of members that know only range (an older
	// fencepost, kafka-go): the group then rebalances eagerly until every
	// member offers cooperative-sticky.
	Assignor string `yaml:"assignor"`
	// GroupProtocol is the consumer-group protocol: classic (the
	// default: JoinGroup and SyncGroup, the leader assigns with
	// Assignor) or consumer (KIP-848, Kafka 4.0 or later: the group
	// coordinator assigns with RemoteAssignor; every rebalance is
	// incremental, and setting Assignor is an error).
	GroupProtocol string `yaml:"group_protocol"`
	// RemoteAssignor is the broker-side assignor of the consumer
	// protocol: uniform or range; empty (the default) is the broker's
	// (group.consumer.assignors, uniform on Kafka 4.x).
	RemoteAssignor string `yaml:"remote_assignor"`
}

// The group protocols of ConsumerConfig.GroupProtocol.
const (
	GroupProtocolClassic  = "classic"
	GroupProtocolConsumer = "consumer"
)

// The assignors of ConsumerConfig.Assignor.
const (
	AssignorCooperativeSticky = "cooperative-sticky"
	AssignorRange             = "range"
	AssignorRoundRobin        = "roundrobin"
)

// DeadLetterPolicy says what happens to a record a stage keeps rejecting.
type DeadLetterPolicy string

const (
	// DeadLetterTopic writes the record, with error headers, to
	// DeadLetterConfig.Topic, and the partition continues.
	DeadLetterTopic DeadLetterPolicy = "topic"
	// DeadLetterStop stops the record's partition (only that one) with
	// an error; its offsets before the record are committed.
	DeadLetterStop DeadLetterPolicy = "stop"
)

// DeadLetterConfig configures failure handling.
type DeadLetterConfig struct {
	// Topic receives failed records. Setting it makes the default
	// policy "topic".
	Topic string `yaml:"topic"`
	// Policy is topic or stop. Default: topic when Topic is set, else
	// stop (a failed record is never dropped silently).
	Policy DeadLetterPolicy `yaml:"policy"`
	// Retries is how often a failing record is retried alone before the
	// policy applies. Default 3; set -1 for none (less is an error).
	Retries int `yaml:"retries"`
	// Backoff before the first retry; it doubles each time, up to 10s
	// (a longer Backoff is an error). Default 100ms.
	Backoff time.Duration `yaml:"backoff"`
}

// WithDefaults returns c with every zero field set to its default: the
// configuration New runs with. It is idempotent; Validate checks its
// result.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defB := func(b *ByteSize, v ByteSize) {
		if *b == 0 {
			*b = v
		}
	}
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = "fencepost"
	}
	c.State = c.State.withDefaults(c.Consumer.Group)
	def(&c.Kafka.DialTimeout, 10*time.Second)
	def(&c.Kafka.MetadataMaxAge, 5*time.Second)
	if c.Kafka.Partitioner == "" {
		c.Kafka.Partitioner = PartitionerMurmur2
	}
	k := &c.Consumer
	def(&k.CommitInterval, 100*time.Millisecond)
	def(&k.ProcessingTimeout, time.Minute)
	def(&k.FetchMaxWait, 500*time.Millisecond)
	defB(&k.FetchMinBytes, 1)
	defB(&k.FetchMaxBytes, 50*MiB)
	defB(&k.MaxPartitionFetchBytes, 1*MiB)
	defB(&k.BufferBytes, 16*MiB)
	if k.Ordering == "" {
		k.Ordering = OrderByPartition
	}
	if k.Concurrency == 0 {
		k.Concurrency = runtime.GOMAXPROCS(0)
	}
	def(&k.SessionTimeout, 30*time.Second)
	def(&k.HeartbeatInterval, 3*time.Second)
	def(&k.RebalanceTimeout, 30*time.Second)
	if k.Assignor == "" {
		k.Assignor = AssignorCooperativeSticky
	}
	if k.GroupProtocol == "" {
		k.GroupProtocol = GroupProtocolClassic
	}
	d := &c.DeadLetter
	if d.Policy == "" {
		d.Policy = DeadLetterStop
		if d.Topic != "" {
			d.Policy = DeadLetterTopic
		}
	}
	if d.Retries == 0 {
		d.Retries = 3 // -1 stays: no retries
	}
	def(&d.Backoff, 100*time.Millisecond)
	def(&c.ShutdownTimeout, 30*time.Second)
	if c.Guarantee == "" {
		c.Guarantee = AtLeastOnce
	}
	def(&c.TransactionTimeout, DefaultTransactionTimeout)
	if c.Guarantee == ExactlyOnce {
		c.Consumer.ReadCommitted = true
	}
	return c
}

// FieldError is a problem with one field of a Config. Validate reports
// every problem it finds as a *FieldError, joined with errors.Join: get
// them back with FieldErrors (or one with errors.As).
//
// The offending value is a field of its own, so that a caller showing
// the error where a value must not appear (it may hold a secret read
// from the environment) can find it in Msg and redact it.
type FieldError struct {
	// Key is the field's path in a configuration file's terms: YAML keys
	// joined with dots, list entries indexed, such as
	// "consumer.topics[1]".
	Key string
	// Value is the value the problem is about, if any, else "". Msg
	// may show it, quoted as %q does.
	Value string
	// Msg says what is wrong, without the key. It does not end with a
	// period.
	Msg string
}

// Error formats the problem as "key: msg".
func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// FieldErrors returns the *FieldError values err holds, in order: err
// itself, or those joined in it (errors.Join) or wrapped by it, at any
// depth. It returns nil for a nil err, or one that holds none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Validate checks the configuration and returns every problem at once,
// each a *FieldError naming its key (see FieldErrors). The bounds are
// Kafka's where Kafka sets them (see each field).
func (c Config) Validate() error {
	assignorSet := c.Consumer.Assignor != "" // before the default fills it
	c = c.withDefaults()
	var errs []error
	// bad reports a problem at key; badValue one about value, which the
	// message quotes.
	bad := func(key, format string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	badValue := func(key, value, format string, args ...any) {
		errs = append(errs, &FieldError{Key: key, Value: value, Msg: fmt.Sprintf(format, args...)})
	}
	c.State.validate(bad, badValue)
	if len(c.Kafka.Brokers) == 0 {
		bad("kafka.brokers", "at least one broker address (host:port) is required")
	}
	for i, b := range c.Kafka.Brokers {
		if msg := checkHostPort(b); msg != "" {
			badValue(fmt.Sprintf("kafka.brokers[%d]", i), b, "%q%s", b, msg)
		}
	}
	if s := c.Kafka.SASL; s != nil {
		if _, err := kafkaauth.New(s.Mechanism, s.Username, ""); err != nil {
			// The message names the key and the mechanisms known.
			const key = "kafka.sasl.mechanism"
			badValue(key, s.Mechanism, "%s", strings.TrimPrefix(err.Error(), key+": "))
		}
		if s.Username == "" {
			bad("kafka.sasl.username", "required with SASL")
		}
	}
	if t := c.Kafka.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		bad("kafka.tls", "cert_file and key_file go together")
	}
	if err := c.Kafka.Partitioner.Validate(); err != nil {
		badValue("kafka.partitioner", string(c.Kafka.Partitioner), "%v", err)
	}
	k := c.Consumer
	if k.Group == "" {
		bad("consumer.group", "a consumer group id is required")
	}
	if len(k.Topics) == 0 {
		bad("consumer.topics", "at least one topic is required")
	}
	first := map[string]int{}
	for i, t := range k.Topics {
		key := fmt.Sprintf("consumer.topics[%d]", i)
		if err := limits.TopicName(t); err != nil {
			badValue(key, t, "%v", err)
		} else if j, dup := first[t]; dup {
			badValue(key, t, "%q is listed twice (also consumer.topics[%d]): each topic is consumed once", t, j)
		} else {
			first[t] = i
		}
	}
	if k.AutoOffsetReset > offsetstore.ResetNone {
		bad("consumer.auto_offset_reset", "must be earliest, latest or none")
	}
	switch k.Assignor {
	case AssignorCooperativeSticky, AssignorRange, AssignorRoundRobin:
	default:
		bad("consumer.assignor", "%q is not %s, %s or %s", k.Assignor, AssignorCooperativeSticky, AssignorRange, AssignorRoundRobin)
	}
	switch k.GroupProtocol {
	case GroupProtocolClassic:
		if k.RemoteAssignor != "" {
			bad("consumer.remote_assignor", "only the consumer group protocol uses it (set group_protocol: consumer, or remove it)")
		}
	case GroupProtocolConsumer:
		if assignorSet {
			bad("consumer.assignor", "the consumer group protocol (KIP-848) does not use it: the broker assigns the partitions "+
				"(remove it; consumer.remote_assignor chooses the broker's assignor, Kafka's group.remote.assignor)")
		}
		if k.RemoteAssignor != "" && k.RemoteAssignor != "uniform" && k.RemoteAssignor != "range" {
			bad("consumer.remote_assignor", "%q is not uniform or range", k.RemoteAssignor)
		}
	default:
		bad("consumer.group_protocol", "%q is not %s or %s", k.GroupProtocol, GroupProtocolClassic, GroupProtocolConsumer)
	}
	if k.GroupInstanceID != "" {
		if err := limits.GroupInstanceID(k.GroupInstanceID); err != nil {
			bad("consumer.group_instance_id", "%v", err)
		}
	}
	if k.LeaveGroupOnClose && k.GroupInstanceID == "" {
		bad("consumer.leave_group_on_close", "only a static member (group_instance_id) can choose: a dynamic member always leaves")
	}
	if k.Ordering != OrderByPartition && k.Ordering != OrderByKey {
		badValue("consumer.ordering", string(k.Ordering), "%q is not partition or key", k.Ordering)
	}
	if k.Concurrency < 0 {
		bad("consumer.concurrency", "must be positive")
	} else if k.Concurrency > limits.MaxConcurrency {
		bad("consumer.concurrency", "%d is more than %d", k.Concurrency, limits.MaxConcurrency)
	}
	if k.FetchConcurrency < 0 || k.FetchConcurrency > limits.MaxFetchConcurrency {
		bad("consumer.fetch_concurrency", "%d is not between 1 and %d (or 0 to choose from the partitions per broker)",
			k.FetchConcurrency, limits.MaxFetchConcurrency)
	}
	c.validateSizes(bad)
	c.validateDurations(bad)
	switch c.Guarantee {
	case AtLeastOnce:
	case ExactlyOnce:
		tt := c.TransactionTimeout
		if tt == 0 {
			tt = DefaultTransactionTimeout
		}
		if tt > 0 && tt < time.Second {
			bad("transaction_timeout", "%v is too short for a transaction (at least 1s; the default is %v)", tt, DefaultTransactionTimeout)
		}
		if tt > BrokerTransactionMaxTimeout {
			bad("transaction_timeout", "%v is more than the brokers allow by default (transaction.max.timeout.ms, %v): "+
				"they would refuse the producer with INVALID_TRANSACTION_TIMEOUT", tt, BrokerTransactionMaxTimeout)
		}
		if tt > 0 && c.Consumer.CommitInterval*commitIntervalsPerTxnTimeout > tt {
			bad("consumer.commit_interval", "%v leaves a transaction too little of transaction_timeout (%v): keep it at a quarter of it or less "+
				"(a transaction stays open a commit interval, then its commit may wait up to half of transaction_timeout "+
				"for processing to drain; the last quarter is for the commit itself and pauses such as a GC, before "+
				"the broker aborts the transaction)", c.Consumer.CommitInterval, tt)
		}
	default:
		badValue("guarantee", string(c.Guarantee), "%q is not a guarantee: at_least_once (the default) or exactly_once", string(c.Guarantee))
	}
	d := c.DeadLetter
	if d.Retries < -1 {
		bad("dead_letter.retries", "%d is not a number of retries (-1: none)", d.Retries)
	}
	switch d.Policy {
	case DeadLetterTopic:
		if d.Topic == "" {
			bad("dead_letter.topic", "policy topic needs a topic name")
		}
	case DeadLetterStop:
	default:
		badValue("dead_letter.policy", string(d.Policy), "%q is not topic or stop", d.Policy)
	}
	if d.Topic != "" {
		if err := limits.TopicName(d.Topic); err != nil {
			badValue("dead_letter.topic", d.Topic, "%v", err)
		} else if slices.Contains(k.Topics, d.Topic) {
			badValue("dead_letter.topic", d.Topic, "%q is also consumed: failed records would loop", d.Topic)
		}
	}
	return errors.Join(errs...)
}

// checkHostPort says what is wrong with a host:port address, or "".
func checkHostPort(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return " is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return ": the port must be a number from 1 to 65535"
	}
	return ""
}

func (c Config) validateSizes(bad func(key, format string, args ...any)) {
	if b := c.Kafka.MaxBatchBytes; b != 0 && (b < KiB || b > limits.MaxFetchBytes) {
		bad("kafka.max_batch_bytes", "%v is outside 1KiB..1GiB (left out: each topic's max.message.bytes)", b)
	}
	k := c.Consumer
	for _, s := range []struct {
		key string
		b   ByteSize
	}{
		{"consumer.fetch_min_bytes", k.FetchMinBytes}, {"consumer.fetch_max_bytes", k.FetchMaxBytes},
		{"consumer.max_partition_fetch_bytes", k.MaxPartitionFetchBytes}, {"consumer.buffer_bytes", k.BufferBytes},
	} {
		switch {
		case s.b < 0:
			bad(s.key, "%v is negative", s.b)
		case s.key != "consumer.buffer_bytes" && s.b > limits.MaxFetchBytes:
			bad(s.key, "%v is outside 1B..%v (a Kafka request size is a 32-bit number)", s.b, ByteSize(limits.MaxFetchBytes))
		}
	}
	if k.BufferBytes >= 0 && k.BufferBytes < k.MaxPartitionFetchBytes {
		bad("consumer.buffer_bytes", "%v is smaller than max_partition_fetch_bytes (%v): fetching could never start", k.BufferBytes, k.MaxPartitionFetchBytes)
	}
	if k.FetchMaxBytes >= 0 && k.FetchMaxBytes < k.MaxPartitionFetchBytes {
		bad("consumer.fetch_max_bytes", "%v is smaller than max_partition_fetch_bytes (%v)", k.FetchMaxBytes, k.MaxPartitionFetchBytes)
	}
}

func (c Config) validateDurations(bad func(key, format string, args ...any)) {
	k := c.Consumer
	// millis: Kafka carries the value as int32 milliseconds.
	for _, d := range []struct {
		key    string
		d      time.Duration
		millis bool
	}{
		{"kafka.dial_timeout", c.Kafka.DialTimeout, true}, {"kafka.metadata_max_age", c.Kafka.MetadataMaxAge, true},
		{"consumer.commit_interval", k.CommitInterval, false}, {"consumer.fetch_max_wait", k.FetchMaxWait, true},
		{"consumer.processing_timeout", k.ProcessingTimeout, false}, {"consumer.session_timeout", k.SessionTimeout, true},
		{"consumer.heartbeat_interval", k.HeartbeatInterval, true}, {"consumer.rebalance_timeout", k.RebalanceTimeout, true},
		{"dead_letter.backoff", c.DeadLetter.Backoff, false}, {"shutdown_timeout", c.ShutdownTimeout, false},
		{"transaction_timeout", c.TransactionTimeout, true},
	} {
		switch {
		case d.d < 0:
			bad(d.key, "must not be negative")
		case d.millis && d.d > limits.MaxRequestDuration:
			bad(d.key, "%v is longer than Kafka's limit for it (%v: int32 milliseconds)", d.d, limits.MaxRequestDuration)
		case d.millis && d.d%time.Millisecond != 0:
			bad(d.key, "%v is not a whole number of milliseconds (Kafka carries it in milliseconds)", d.d)
		}
	}
	if c.DeadLetter.Backoff > limits.MaxBackoff {
		bad("dead_letter.backoff", "%v is longer than the longest wait between retries (%v)", c.DeadLetter.Backoff, limits.MaxBackoff)
	}
	if k.HeartbeatInterval >= 0 && k.HeartbeatInterval >= k.SessionTimeout && k.SessionTimeout <= limits.MaxRequestDuration {
		bad("consumer.heartbeat_interval", "%v must be well below session_timeout (%v)", k.HeartbeatInterval, k.SessionTimeout)
	}
}
