// Package kafkawire is how the engine's steps send Kafka requests, so that
// no kafka-go type appears in the steps' exported API: Client (a kafka-go
// RoundTripper and the cluster's bootstrap address) for resolve and the
// metadata refresher, and Dialer and Conn (one connection to one broker)
// for the fetch streams.
package kafkawire

import (
	"context"
	"net"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Client sends requests to one cluster. It is safe for concurrent use.
type Client struct {
	rt   kafka.RoundTripper
	addr net.Addr
}

// New returns a client sending through rt (a *kafka.Transport: its
// metadata cache routes each request to the right broker) to the cluster
// at addr (kafka.TCP(brokers...)).
func New(rt kafka.RoundTripper, addr net.Addr) *Client { return &Client{rt: rt, addr: addr} }

// RoundTrip sends req and returns the response.
func (c *Client) RoundTrip(ctx context.Context, req protocol.Message) (protocol.Message, error) {
	return c.rt.RoundTrip(ctx, c.addr, req)
}
