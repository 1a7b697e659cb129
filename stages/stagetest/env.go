package stagetest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"

	"github.com/fencepost-dev/fencepost/internal/syncio"
	"github.com/fencepost-dev/fencepost/stages"
)

// Env returns a stages.Env for building stages in tests: a no-op logger,
// stdout (io.Discard if nil; writes to it are serialized, as the
// pipeline's are) as Stdout and p's producers (Producer is nil
// if p is nil, as when the pipeline has no cluster, e.g. in lint).
// Counter is nil (through Build, counters that count nowhere): set it to
// a Counters' Counter method to read what the stage counts.
func Env(stdout io.Writer, p *Producer) stages.Env {
	if stdout == nil {
		stdout = io.Discard
	}
	env := stages.Env{Log: stages.NopLogger, Stdout: syncio.NewWriter(stdout)}
	if p != nil {
		env.Producer = p.Open
	}
	return env
}

// Buffer is a bytes.Buffer safe for concurrent use, for Env's stdout.
// The zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns what was written, split into lines without their "\n"
// (nil if nothing was).
func (b *Buffer) Lines() []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Producer is an in-memory stages.Producer for many topics: it stores
// the records of every Produce call that succeeds. Set Fail before use to
// make calls fail. The zero value is ready; it is safe for concurrent use.
type Producer struct {
	// Fail, if set, is called at the start of every Produce call with the
	// topic and the records; a non-nil result is what Produce returns,
	// and nothing of that call is stored. It may be called concurrently.
	Fail func(topic string, records []stages.Record) error

	mu    sync.Mutex
	calls int
	acked map[string][]stages.Record
}

// Open returns the producer for topic; it has the type of
// stages.Env.Producer and never fails.
func (p *Producer) Open(topic string) (stages.Producer, error) {
	return topicProducer{p: p, topic: topic}, nil
}

// Records returns copies of the records acknowledged for topic, in the
// order they were produced.
func (p *Producer) Records(topic string) []stages.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]stages.Record(nil), p.acked[topic]...)
}

// Calls returns the number of Produce calls so far, failed ones included.
func (p *Producer) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

type topicProducer struct {
	p     *Producer
	topic string
}

func (t topicProducer) Produce(ctx context.Context, records []stages.Record) error {
	t.p.mu.Lock()
	t.p.calls++
	t.p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.p.Fail != nil {
		if err := t.p.Fail(t.topic, records); err != nil {
			return err
		}
	}
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	if t.p.acked == nil {
		t.p.acked = map[string][]stages.Record{}
	}
	t.p.acked[t.topic] = append(t.p.acked[t.topic], records...)
	return nil
}
