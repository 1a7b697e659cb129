package kafkawire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(2, "wire")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// metadata asks for topic "wire" and returns the answer.
func metadata(ctx context.Context, c *Conn) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12 // flexible: the response header has tags to skip
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("wire")
	req.Topics = append(req.Topics, topic)
	resp := kmsg.NewPtrMetadataResponse()
	return resp, c.Request(ctx, req, resp)
}

func TestConnRequestToBroker(t *testing.T) {
	cluster := newCluster(t)
	ctx := context.Background()
	conn, err := (&Dialer{ClientID: "wire-test", Timeout: 5 * time.Second}).Dial(ctx, cluster.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.Addr() != cluster.ListenAddrs()[0] {
		t.Errorf("Addr() = %q, want %q", conn.Addr(), cluster.ListenAddrs()[0])
	}
	// Two requests on one connection: correlation ids advance and each
	// answer is matched to its request.
	for i := 0; i < 2; i++ {
		resp, err := metadata(ctx, conn)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "wire" || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("request %d: metadata %+v, want topic wire with 2 partitions", i, resp.Topics)
		}
	}
}

func TestDialAuthenticatesWithSASL(t *testing.T) {
	cluster := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right"))
	addr := cluster.ListenAddrs()[0]
	ctx := context.Background()

	good := &Dialer{Timeout: 5 * time.Second, SASL: plain.Auth{User: "alice", Pass: "right"}.AsMechanism()}
	conn, err := good.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	if _, err := metadata(ctx, conn); err != nil {
		t.Errorf("request after authenticating: %v", err)
	}
	conn.Close()

	bad := &Dialer{Timeout: 5 * time.Second, SASL: plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()}
	if conn, err := bad.Dial(ctx, addr); err == nil {
		conn.Close()
		t.Fatal("wrong password: dial succeeded")
	} else if !strings.Contains(err.Error(), "SASL PLAIN with "+addr) {
		t.Errorf("wrong password: error %q does not name the mechanism and broker", err)
	}
}

// fakeBroker accepts one connection, reads one request frame, and writes
// what answer returns for the request's correlation id (nothing if nil,
// then waits until the test ends).
func fakeBroker(t *testing.T, answer func(corr int32) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	served := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); <-served })
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		// request header: api key (2), version (2), correlation id (4)
		if b := answer(int32(binary.BigEndian.Uint32(req[4:8]))); b != nil {
			_, _ = c.Write(b)
		}
		<-done
	}()
	return ln.Addr().String()
}

func TestConnRefusesBadResponses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer func(corr int32) []byte
		want   string
	}{
		{"frame too large", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 1<<31-1) },
			"not a Kafka broker"},
		{"frame too small", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 2) },
			"not a Kafka broker"},
		{"answer to another request", func(corr int32) []byte {
			sized := binary.BigEndian.AppendUint32(nil, 4) // a frame of just a correlation id
			return binary.BigEndian.AppendUint32(sized, uint32(corr+7))
		}, "answers request"},
		{"frame cut short", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 100) },
			""}, // any error: the 100 bytes announced never come
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeBroker(t, tt.answer)
			conn, err := (&Dialer{Timeout: time.Second}).Dial(context.Background(), addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err = metadata(ctx, conn)
			if err == nil {
				t.Fatal("request succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), addr) {
				t.Errorf("error %q, want it to name %s and say %q", err, addr, tt.want)
			}
			// a broken connection stays broken: the next request fails
			// at once without writing anything
			began := time.Now()
			if _, err2 := metadata(context.Background(), conn); err2 == nil {
				t.Error("request on the broken connection succeeded")
			}
			if d := time.Since(began); d > 100*time.Millisecond {
				t.Errorf("request on the broken connection took %v", d)
			}
		})
	}
}

func TestConnRequestEndsWithContext(t *testing.T) {
	addr := fakeBroker(t, func(int32) []byte { return nil }) // never answers
	conn, err := (&Dialer{Timeout: time.Second}).Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopping")
	time.AfterFunc(50*time.Millisecond, func() { cancel(stop) })
	began := time.Now()
	_, err = metadata(ctx, conn)
	if !errors.Is(err, stop) {
		t.Fatalf("error %v, want the context's cause", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("cancelled request returned after %v", d)
	}
}

func TestSkipTags(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want int
		ok   bool
	}{
		{"no tags", []byte{0, 0xff}, 1, true},
		{"one tag of two bytes", []byte{1, 5, 2, 0xaa, 0xbb, 0xff}, 5, true},
		{"two tags", []byte{2, 0, 0, 1, 1, 0xcc}, 6, true},
		{"empty", nil, 0, false},
		{"count past the end", []byte{3, 0, 0}, 0, false},
		{"size past the end", []byte{1, 0, 9, 1, 2}, 0, false},
		{"unterminated varint", []byte{0x80}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := SkipTags(tt.in)
			if (err == nil) != tt.ok || n != tt.want {
				t.Errorf("SkipTags(%x) = %d, %v; want %d, ok %v", tt.in, n, err, tt.want, tt.ok)
			}
		})
	}
}

// DialNet's connection is authenticated and speaks Kafka: a request
// framed by hand on it is answered.
func TestDialNetAuthenticates(t *testing.T) {
	cluster := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right"))
	d := &Dialer{Timeout: 5 * time.Second, SASL: plain.Auth{User: "alice", Pass: "right"}.AsMechanism()}
	nc, err := d.DialNet(context.Background(), "tcp", cluster.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest() // v0: no tagged fields
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("t")).AppendRequest(nil, req, 42)
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var head [8]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		t.Fatalf("no answer on the authenticated connection: %v", err)
	}
	if corr := binary.BigEndian.Uint32(head[4:]); corr != 42 {
		t.Errorf("answer to request %d, want 42", corr)
	}
	if _, err := d.DialNet(context.Background(), "udp", cluster.ListenAddrs()[0]); err == nil {
		t.Error("DialNet accepted network udp")
	}
}
