package run

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencepost-dev/fencepost/internal/config"
)

// explainRunError makes an error that ended a run before it got going
// say more: --for ending before the pipeline connected, and, when the
// brokers could not be reached, what answers at their addresses (an HTTP
// server, a TLS listener while kafka.tls is not set, ...). Other errors
// are returned as they are.
func explainRunError(ctx context.Context, o runOptions, cfg *config.Config, err error) error {
	if o.forDur > 0 && err == context.DeadlineExceeded {
		return fmt.Errorf("--for %v ended before the pipeline had connected to Kafka (connecting may take up to kafka.dial_timeout, %v): "+
			"give --for more time, or check that the brokers answer", o.forDur, cfg.Pipeline.WithDefaults().Kafka.DialTimeout)
	}
	if cfg.Embedded != nil || !unreachable(err) {
		return err
	}
	var found []string
	for _, f := range probeBrokers(ctx, cfg.Pipeline.Kafka.Brokers, cfg.Pipeline.Kafka.TLS != nil) {
		if f != "" {
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		return err
	}
	return fmt.Errorf("%w\n%s", err, strings.Join(found, "\n"))
}

// unreachable says whether err is one that connecting gives: a time-out,
// a closed connection, a refused or failed dial.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &ne)
}

// probeWait bounds each step of a probe.
const probeWait = time.Second

// probeBrokers probes the first three addresses at once and returns what
// it found at each ("" if nothing worth saying: a Kafka listener of the
// kind configured).
func probeBrokers(ctx context.Context, addrs []string, useTLS bool) []string {
	addrs = addrs[:min(len(addrs), 3)]
	out := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { out[i] = describe(a, probe(ctx, a), useTLS) })
	}
	wg.Wait()
	return out
}

// listener is what probe found at an address.
type listener int

const (
	foundNothing listener = iota // connection refused, or no route
	foundKafka                   // answered a Kafka request in plaintext
	foundTLS                     // completed a TLS handshake
	foundHTTP                    // answered as an HTTP server
	foundSilent                  // accepted, but answered none of them
)

func describe(addr string, l listener, useTLS bool) string {
	switch {
	case l == foundNothing:
		return fmt.Sprintf("found: nothing listens at %s (check the host and port in kafka.brokers, and that the broker runs)", addr)
	case l == foundHTTP:
		return fmt.Sprintf("found: an HTTP server answers at %s, not Kafka (check the port in kafka.brokers)", addr)
	case l == foundTLS && !useTLS:
		return fmt.Sprintf("found: %s speaks TLS, but kafka.tls is not set (add kafka.tls, with ca_file if the brokers' CA is private)", addr)
	case l == foundKafka && useTLS:
		return fmt.Sprintf("found: %s answers Kafka without TLS, but kafka.tls is set (remove kafka.tls, or use the brokers' TLS port)", addr)
	case l == foundSilent:
		return fmt.Sprintf("found: %s accepts connections but answers neither Kafka, TLS nor HTTP", addr)
	}
	return ""
}

// probe finds out what listens at addr: it sends a Kafka ApiVersions
// request in plaintext, then tries a TLS handshake, then an HTTP request,
// each on a connection of its own and within probeWait.
func probe(ctx context.Context, addr string) listener {
	answer, err := exchange(ctx, addr, apiVersionsRequest())
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || err != nil && !errors.As(err, &ne):
		return foundNothing
	case isKafkaAnswer(answer):
		return foundKafka
	case bytes.HasPrefix(answer, []byte("HTTP/")):
		return foundHTTP
	}
	if l, ok := probeTLS(ctx, addr); ok {
		return l
	}
	if answer, _ := exchange(ctx, addr, []byte("HEAD / HTTP/1.0\r\n\r\n")); bytes.HasPrefix(answer, []byte("HTTP/")) {
		return foundHTTP
	}
	return foundSilent
}

// exchange writes req to a new connection to addr and returns what came
// back within probeWait. The error is the dial's, if it failed.
func exchange(ctx context.Context, addr string, req []byte) ([]byte, error) {
	d := net.Dialer{Timeout: probeWait}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeWait))
	if _, err := c.Write(req); err != nil {
		return nil, nil
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, buf, 8)
	return buf[:n], nil
}

// probeTLS tries a TLS handshake (without checking the certificate: this
// only asks whether the listener speaks TLS).
func probeTLS(ctx context.Context, addr string) (listener, bool) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: probeWait}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe, no data
	cctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	c, err := d.DialContext(cctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		return foundTLS, true
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && bytes.HasPrefix(rh.RecordHeader[:], []byte("HTTP/")) {
		return foundHTTP, true
	}
	return 0, false
}

const probeCorrelationID = 0x66706f73

// apiVersionsRequest is a Kafka ApiVersions v0 request, which any Kafka
// broker answers before authentication.
func apiVersionsRequest() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("fencepost-probe")).AppendRequest(nil, req, probeCorrelationID)
}

// isKafkaAnswer says whether b starts a response to apiVersionsRequest.
func isKafkaAnswer(b []byte) bool {
	return len(b) >= 8 && binary.BigEndian.Uint32(b[4:8]) == probeCorrelationID
}
