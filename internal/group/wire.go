package group

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/apiversions"
	"github.com/segmentio/kafka-go/protocol/findcoordinator"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

// Lowest versions the member sends. Each is above Kafka 4.0's floor
// (KIP-896) and carries the fields the member needs: JoinGroup v5,
// SyncGroup v3, Heartbeat v3 and LeaveGroup v3 the group instance id
// (KIP-345), OffsetCommit v7 the instance id and leader epoch, OffsetFetch
// v5 the leader epoch (v7 RequireStable, needed only with
// Config.RequireStable), FindCoordinator v1 an error message.
const (
	minJoinGroup         = 5
	minSyncGroup         = 3
	minHeartbeat         = 3
	minLeaveGroup        = 3
	minOffsetCommit      = 7
	minOffsetFetch       = 5
	minOffsetFetchStable = 7
	minFindCoordinator   = 1
	minMetadata          = 4
)

// maxOffsetFetch is the highest OffsetFetch version the member sends: v8
// moves the request into an array of groups and v9 adds the consumer
// protocol's member epoch, neither of which the member needs (a fetch
// without a member id and member epoch is accepted by consumer-protocol
// groups too).
const maxOffsetFetch = 7

// conn is one connection to one broker, for kafka-go protocol requests
// sent one at a time. One goroutine owns it at a time. After any error the
// connection is closed and every later request fails: dial a new one.
type conn struct {
	nc       net.Conn
	addr     string
	clientID string
	corr     int32
	versions map[protocol.ApiKey]int16 // the broker's highest version per key
	format   *kmsg.RequestFormatter
	err      error
}

// dial connects to addr and asks the broker which versions it speaks.
func dial(ctx context.Context, d DialFunc, addr, clientID string) (*conn, error) {
	nc, err := d(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial broker %s: %w", addr, err)
	}
	c := &conn{nc: nc, addr: addr, clientID: clientID}
	resp, err := c.roundTripVersion(ctx, 2, &apiversions.Request{})
	if err != nil {
		c.close()
		return nil, err
	}
	r := resp.(*apiversions.Response)
	if r.ErrorCode != 0 {
		c.close()
		return nil, fmt.Errorf("ApiVersions from %s: %w", addr, kafka.Error(r.ErrorCode))
	}
	c.versions = make(map[protocol.ApiKey]int16, len(r.ApiKeys))
	for _, k := range r.ApiKeys {
		c.versions[protocol.ApiKey(k.ApiKey)] = k.MaxVersion
	}
	return c, nil
}

func (c *conn) close() {
	if c == nil {
		return
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	_ = c.nc.Close()
}

// roundTrip sends req at the highest version both kafka-go and the broker
// speak, which must be at least minVersion.
func (c *conn) roundTrip(ctx context.Context, minVersion int16, req protocol.Message) (protocol.Message, error) {
	key := req.ApiKey()
	brokerMax, ok := c.versions[key]
	if !ok {
		return nil, fmt.Errorf("broker %s does not support %s: %w", c.addr, key, ErrUnsupportedBroker)
	}
	v := min(brokerMax, key.MaxVersion())
	if v < minVersion {
		return nil, fmt.Errorf("broker %s speaks %s up to v%d, the member needs v%d (Kafka 2.4 or later): %w",
			c.addr, key, brokerMax, minVersion, ErrUnsupportedBroker)
	}
	return c.roundTripVersion(ctx, v, req)
}

func (c *conn) roundTripVersion(ctx context.Context, v int16, req protocol.Message) (protocol.Message, error) {
	var resp protocol.Message
	err := c.exchange(ctx, func() error {
		c.corr++
		var err error
		resp, err = protocol.RoundTrip(c.nc, v, c.corr, c.clientID, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s v%d to %s: %w", req.ApiKey(), v, c.addr, err)
	}
	return resp, nil
}

// roundTripKmsg sends a request framed with franz-go's kmsg, at the
// highest version both kmsg and the broker speak (at least minVersion),
// and reads the answer into resp.
func (c *conn) roundTripKmsg(ctx context.Context, minVersion int16, req kmsg.Request, resp kmsg.Response) error {
	return c.roundTripKmsgUpTo(ctx, minVersion, req.MaxVersion(), req, resp)
}

// roundTripKmsgUpTo is roundTripKmsg sending at most maxVersion.
func (c *conn) roundTripKmsgUpTo(ctx context.Context, minVersion, maxVersion int16, req kmsg.Request, resp kmsg.Response) error {
	key := protocol.ApiKey(req.Key())
	// kmsg names every key; kafka-go's ApiKey only those it implements
	name := kmsg.NameForKey(req.Key())
	brokerMax, ok := c.versions[key]
	if !ok {
		return fmt.Errorf("broker %s does not support %s: %w", c.addr, name, ErrUnsupportedBroker)
	}
	v := min(brokerMax, maxVersion)
	if v < minVersion {
		return fmt.Errorf("broker %s speaks %s up to v%d, the member needs v%d: %w", c.addr, name, brokerMax, minVersion, ErrUnsupportedBroker)
	}
	req.SetVersion(v)
	resp.SetVersion(v)
	err := c.exchange(ctx, func() error {
		c.corr++
		if c.format == nil {
			c.format = kmsg.NewRequestFormatter(kmsg.FormatterClientID(c.clientID))
		}
		if _, err := c.nc.Write(c.format.AppendRequest(nil, req, c.corr)); err != nil {
			return err
		}
		var size [4]byte
		if _, err := io.ReadFull(c.nc, size[:]); err != nil {
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > maxResponse {
			return fmt.Errorf("response frame of %d bytes: not a Kafka broker, or a broken connection", n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c.nc, frame); err != nil {
			return err
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != c.corr {
			return fmt.Errorf("response to request %d answers request %d", c.corr, corr)
		}
		body := frame[4:]
		// Every flexible response header has tags, but ApiVersions'
		// (KIP-511: a client must read it before it knows the version).
		if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
			n, err := kafkawire.SkipTags(body)
			if err != nil {
				return err
			}
			body = body[n:]
		}
		return resp.ReadFrom(body)
	})
	if err != nil {
		return fmt.Errorf("%s v%d to %s: %w", name, v, c.addr, err)
	}
	return nil
}

// describeRelease asks the broker for ApiVersions v3 (which carries the
// KRaft features) and names its Apache Kafka release from the highest
// metadata.version it supports, as kafkawire.ReleaseOfMetadataVersion
// does; "" if it cannot tell (an older broker, a ZooKeeper-mode one, or
// any error: the caller is already reporting one).
func (c *conn) describeRelease(ctx context.Context) string {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "fencepost", "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := c.roundTripKmsgUpTo(ctx, 3, 3, req, resp); err != nil || resp.ErrorCode != 0 {
		return ""
	}
	for _, f := range resp.SupportedFeatures {
		if f.Name == "metadata.version" {
			return kafkawire.ReleaseOfMetadataVersion(f.MaxVersion)
		}
	}
	return ""
}

// exchange runs fn (one request and its answer on c.nc) bounded by ctx;
// an error breaks the connection.
func (c *conn) exchange(ctx context.Context, fn func() error) error {
	if c.err != nil {
		return c.err
	}
	err := kafkawire.Bound(ctx, c.nc, fn)
	if err != nil {
		c.fail(err)
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
	}
	return err
}

// maxResponse is the largest response frame accepted.
const maxResponse = 1 << 30

func (c *conn) fail(err error) {
	c.err = err
	_ = c.nc.Close()
}

// findCoordinator asks the bootstrap brokers, in turn, which broker
// coordinates group and connects to it.
func findCoordinator(ctx context.Context, d DialFunc, brokers []string, clientID, group string) (*conn, error) {
	var errs []error
	for _, b := range brokers {
		c, err := dial(ctx, d, b, clientID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := c.roundTrip(ctx, minFindCoordinator, &findcoordinator.Request{Key: group, KeyType: 0})
		if err != nil {
			c.close()
			errs = append(errs, err)
			continue
		}
		r := resp.(*findcoordinator.Response)
		if r.ErrorCode != 0 {
			c.close()
			errs = append(errs, fmt.Errorf("FindCoordinator for group %q from %s: %w %s", group, b, kafka.Error(r.ErrorCode), r.ErrorMessage))
			continue
		}
		addr := net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
		if addr == b {
			return c, nil
		}
		c.close()
		cc, err := dial(ctx, d, addr, clientID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return cc, nil
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return nil, fmt.Errorf("no group coordinator for %q (check kafka.brokers and that they are reachable): %w", group, errors.Join(errs...))
}

// isCoordinatorError reports the error codes that mean the coordinator
// moved or is loading (kafkawire.NotCoordinator): find it again and
// retry.
func isCoordinatorError(code int16) bool {
	return kafkawire.ClassifyCode(code) == kafkawire.NotCoordinator
}
