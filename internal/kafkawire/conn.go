package kafkawire

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// maxResponse is the largest response frame a Conn accepts: a frame
// claiming more is a protocol error (or not Kafka at all), not a reason
// to allocate it.
const maxResponse = 1 << 30

// Dialer opens connections to brokers for requests the engine encodes
// itself (the fetch path): TLS and SASL as configured, the client id on
// every request. The zero value dials plaintext with a 10s timeout.
type Dialer struct {
	// ClientID is sent with every request.
	ClientID string
	// Timeout bounds dialing, the TLS handshake and SASL authentication.
	Timeout time.Duration
	// TLS, if set, is used for every connection; an empty ServerName is
	// the host dialled.
	TLS *tls.Config
	// SASL, if set, authenticates every connection.
	SASL sasl.Mechanism
}

// Dial connects to the broker at addr (host:port) and authenticates.
func (d *Dialer) Dial(ctx context.Context, addr string) (*Conn, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nd := &net.Dialer{}
	var c net.Conn
	var err error
	if d.TLS != nil {
		cfg := d.TLS.Clone()
		if cfg.ServerName == "" {
			if host, _, herr := net.SplitHostPort(addr); herr == nil {
				cfg.ServerName = host
			}
		}
		c, err = (&tls.Dialer{NetDialer: nd, Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial broker %s: %w", addr, err)
	}
	conn := &Conn{c: c, addr: addr, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(d.ClientID))}
	if d.SASL != nil {
		if err := conn.authenticate(ctx, d.SASL); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return conn, nil
}

// DialNet connects to the broker at addr and authenticates, like Dial,
// and returns the connection itself, for a client that frames its own
// requests on it (the group member). network must be "tcp".
func (d *Dialer) DialNet(ctx context.Context, network, addr string) (net.Conn, error) {
	if network != "tcp" {
		return nil, fmt.Errorf("dial broker %s: network %q is not tcp", addr, network)
	}
	c, err := d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c.c, nil
}

// Conn is one connection to one broker, for requests sent one at a time
// and answered in order. It is not safe for concurrent use: one
// goroutine owns it. After any error the connection is closed and every
// later request fails: dial a new one.
type Conn struct {
	c      net.Conn
	addr   string
	format *kmsg.RequestFormatter
	corr   int32
	wbuf   []byte
	err    error // the connection is broken
}

// Addr is the broker address the connection is to.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection.
func (c *Conn) Close() error {
	if c.err == nil {
		c.err = net.ErrClosed
	}
	return c.c.Close()
}

// Request sends req and reads its answer into resp (of req's kind and
// version). The answer's frame is read into a buffer of its own that is
// never reused: resp may keep references into it (kmsg parses byte
// fields, such as a fetch's record batches, without copying). ctx ending
// aborts the request and breaks the connection.
func (c *Conn) Request(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	if c.err != nil {
		return c.err
	}
	body, err := c.roundTrip(ctx, req)
	if err != nil {
		c.err = err
		_ = c.c.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("%s request to %s: %w", kmsg.NameForKey(req.Key()), c.addr, context.Cause(ctx))
		}
		return fmt.Errorf("%s request to %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	resp.SetVersion(req.GetVersion())
	read := resp.ReadFrom
	if u, ok := resp.(interface{ UnsafeReadFrom([]byte) error }); ok {
		read = u.UnsafeReadFrom // strings point into body, which is never reused
	}
	if err := read(body); err != nil {
		c.err = err
		_ = c.c.Close()
		return fmt.Errorf("%s response from %s: %w", kmsg.NameForKey(req.Key()), c.addr, err)
	}
	return nil
}

// roundTrip writes one request frame and returns the body of its answer
// (after the response header).
func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request) (body []byte, err error) {
	err = Bound(ctx, c.c, func() error {
		body, err = c.exchange(req)
		return err
	})
	return body, err
}

// Bound runs fn, which reads and writes nc, within ctx: ctx's deadline
// (none: none) is nc's, and ctx ending unblocks a read or write in
// progress. It returns fn's error, or SetDeadline's.
func Bound(ctx context.Context, nc net.Conn, fn func() error) error {
	dl, _ := ctx.Deadline()
	if err := nc.SetDeadline(dl); err != nil {
		return err
	}
	var mu sync.Mutex
	done := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			_ = nc.SetDeadline(time.Unix(1, 0)) // in the past: the blocked call returns
		}
	})
	err := fn()
	stop()
	mu.Lock()
	done = true
	mu.Unlock()
	return err
}

// exchange writes one request frame and reads the body of its answer
// (after the response header).
func (c *Conn) exchange(req kmsg.Request) ([]byte, error) {
	c.corr++
	c.wbuf = c.format.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.c.Write(c.wbuf); err != nil {
		return nil, err
	}
	var head [8]byte
	if _, err := io.ReadFull(c.c, head[:4]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(head[:4]))
	if size < 4 || size > maxResponse {
		return nil, fmt.Errorf("response frame of %d bytes: not a Kafka broker, or a broken connection", size)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(c.c, frame); err != nil {
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(frame)); corr != c.corr {
		return nil, fmt.Errorf("response to request %d answers request %d", c.corr, corr)
	}
	body := frame[4:]
	// flexible responses (but ApiVersions') have a tagged-field header
	if req.IsFlexible() && req.Key() != 18 {
		n, err := SkipTags(body)
		if err != nil {
			return nil, err
		}
		body = body[n:]
	}
	return body, nil
}

// SkipTags returns the length of the tagged-field section (a flexible
// version's header or body tags) at the start of b, or an error if it is
// malformed or runs past b.
func SkipTags(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, errors.New("bad tagged fields")
	}
	for ; count > 0; count-- {
		_, m := binary.Uvarint(b[n:])
		if m <= 0 {
			return 0, errors.New("bad tagged fields")
		}
		n += m
		size, m := binary.Uvarint(b[n:])
		if m <= 0 || size > uint64(len(b)-n-m) {
			return 0, errors.New("bad tagged fields")
		}
		n += m + int(size)
	}
	return n, nil
}

// authenticate runs SASL (SaslHandshake v1, then SaslAuthenticate v1
// until the mechanism is done).
func (c *Conn) authenticate(ctx context.Context, m sasl.Mechanism) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = m.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.Request(ctx, hs, hsResp); err != nil {
		return fmt.Errorf("SASL handshake with %s: %w", c.addr, err)
	}
	if hsResp.ErrorCode != 0 {
		return fmt.Errorf("SASL handshake with %s: %w (the broker enables %v)", c.addr, kafka.Error(hsResp.ErrorCode), hsResp.SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(c.addr)
	session, msg, err := m.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("SASL %s with %s: %w", m.Name(), c.addr, err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.Request(ctx, req, resp); err != nil {
			return fmt.Errorf("SASL %s with %s: %w", m.Name(), c.addr, err)
		}
		if resp.ErrorCode != 0 {
			detail := ""
			if resp.ErrorMessage != nil {
				detail = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SASL %s with %s: %w%s", m.Name(), c.addr, kafka.Error(resp.ErrorCode), detail)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s with %s: %w", m.Name(), c.addr, err)
		}
		if done {
			return nil
		}
		msg = next
	}
}
