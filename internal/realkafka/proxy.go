package realkafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/kafkawire"
)

// Request is one client request that passed through a node's proxy.
type Request struct {
	// Node is the id of the broker it was sent to.
	Node int32
	// Key and Version are the request's API key and version.
	Key, Version int16
	frame        []byte // header and body, without the size prefix
}

// Decode parses the request body (for a hook that looks at, say, a
// SyncGroup's generation).
func (r *Request) Decode() (kmsg.Request, error) {
	req := kmsg.RequestForKey(r.Key)
	if req == nil {
		return nil, fmt.Errorf("unknown request key %d", r.Key)
	}
	req.SetVersion(r.Version)
	b := r.frame
	if len(b) < 10 {
		return nil, errors.New("short request header")
	}
	b = b[8:] // key, version, correlation id
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if n > 0 {
		if len(b) < n {
			return nil, errors.New("short client id")
		}
		b = b[n:]
	}
	if req.IsFlexible() { // header v2: tagged fields
		n, err := kafkawire.SkipTags(b)
		if err != nil {
			return nil, fmt.Errorf("request header: %w", err)
		}
		b = b[n:]
	}
	if err := req.ReadFrom(b); err != nil {
		return nil, err
	}
	return req, nil
}

// Action is what a Hook decides for a request.
type Action struct {
	// Delay holds the request back this long before the broker sees it
	// (and everything behind it on the same connection).
	Delay time.Duration
	// Cut closes the client's connection instead of forwarding.
	Cut bool
}

// Hook sees every request a proxy forwards, before forwarding it. It is
// called from many goroutines at once.
type Hook func(*Request) Action

// proxy forwards one TCP port to a broker's client listener, request by
// request, so a test can delay or cut a node's traffic. The broker
// advertises the proxy's address, so clients that learn brokers from
// Metadata keep going through it.
//
// While its node is down the proxy does not listen either, so a client
// that dials it is refused, as by a dead broker (a proxy that accepted
// and then hung up would look like a live broker that fails requests,
// and clients treat the two differently).
type proxy struct {
	node    int32
	address string
	target  string
	hook    *atomic.Pointer[Hook]

	mu     sync.Mutex
	ln     net.Listener // nil while paused
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newProxy(node int32, ln net.Listener, target string, hook *atomic.Pointer[Hook]) *proxy {
	p := &proxy{node: node, address: ln.Addr().String(), ln: ln, target: target, hook: hook, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	return p
}

func (p *proxy) addr() string { return p.address }

// pause stops listening and closes every connection.
func (p *proxy) pause() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.cut()
}

// resume listens again on the same address.
func (p *proxy) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil || p.closed {
		return nil
	}
	ln, err := net.Listen("tcp", p.address)
	if err != nil {
		return fmt.Errorf("proxy of node %d: listen again on %s: %w", p.node, p.address, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve forwards one client connection until either side closes it.
func (p *proxy) serve(client net.Conn) {
	defer p.untrack(client)
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return // the broker is down: the client sees a closed connection, as with a dead broker
	}
	if !p.track(upstream) {
		upstream.Close()
		return
	}
	defer p.untrack(upstream)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(client, upstream)
		client.Close()
	}()
	p.forward(client, upstream)
	upstream.Close()
	<-done
}

// forward copies requests from client to upstream one frame at a time,
// asking the hook about each.
func (p *proxy) forward(client, upstream net.Conn) {
	var size [4]byte
	for {
		if _, err := io.ReadFull(client, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 256<<20 {
			return
		}
		frame := make([]byte, 4+n)
		copy(frame, size[:])
		if _, err := io.ReadFull(client, frame[4:]); err != nil {
			return
		}
		if h := p.hook.Load(); h != nil && n >= 4 {
			req := &Request{Node: p.node, Key: int16(binary.BigEndian.Uint16(frame[4:])), Version: int16(binary.BigEndian.Uint16(frame[6:])), frame: frame[4:]}
			act := (*h)(req)
			if act.Cut {
				return
			}
			if act.Delay > 0 {
				time.Sleep(act.Delay)
			}
		}
		if _, err := upstream.Write(frame); err != nil {
			return
		}
	}
}

// cut closes every connection through the proxy; new ones are accepted.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// close stops the proxy and waits for its goroutines.
func (p *proxy) close() {
	p.pause()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
}
