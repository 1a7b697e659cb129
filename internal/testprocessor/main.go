// Command testprocessor is the processor binary with one test stage
// registered, for end-to-end tests that must not depend on the built-in
// stages: it is what a user's own binary looks like (register stages,
// call app.Main).
//
// The stage "record" appends "topic partition offset" for every record
// to the file named by its option "file", and returns only once written,
// so a record is in the file before its offset can be committed. Its
// option "delay" slows it down by that much per record, so a test can
// stop a run mid-stream.
//
// The stage "count" keeps state: it counts the records of each key in
// the store named by its option "store" (default "counts"; a decimal
// count per key) and returns each record with its value followed by a
// space and the key's new count ("id-000000042 7"). Its only effects
// are its outputs and its store, so it takes part in exactly-once: the
// kill loop's -state mode checks the counts after crashes.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/fencepost-dev/fencepost/cmd/processor/app"
	"github.com/fencepost-dev/fencepost/stages"
)

func main() {
	stages.Register(stages.Spec{
		Name:    "record",
		Summary: "Append topic, partition and offset of every record to a file.",
		Options: []stages.OptionSpec{
			{Name: "file", Type: stages.TypeString, Required: true, Doc: "The file to append to."},
			{Name: "delay", Type: stages.TypeDuration, Default: time.Duration(0), Doc: "Time spent on each record."},
		},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			name, err := o.String("file")
			if err != nil {
				return nil, err
			}
			delay, err := o.Duration("delay")
			if err != nil {
				return nil, err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, &stages.OptionError{Option: "file", Err: err}
			}
			return &recorder{f: f, delay: delay}, nil
		},
	})
	stages.Register(stages.Spec{
		Name:        "count",
		Summary:     "Count the records of each key in a store; append the new count to each value.",
		ExactlyOnce: true,
		Options: []stages.OptionSpec{
			{Name: "store", Type: stages.TypeString, Default: "counts", Doc: "The store's name (its changelog is <group>-<store>-changelog)."},
		},
		New: func(o stages.Options, _ stages.Env) (stages.Stage, error) {
			name, err := o.String("store")
			if err != nil {
				return nil, err
			}
			if err := stages.ValidStoreName(name); err != nil {
				return nil, &stages.OptionError{Option: "store", Err: err}
			}
			return counter{store: name}, nil
		},
	})
	os.Exit(app.Main(os.Args[1:]))
}

// counter is the stage "count".
type counter struct{ store string }

func (c counter) Stores() []string { return []string{c.store} }

func (c counter) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	st, err := stages.StoreFor(ctx, c.store)
	if err != nil {
		return nil, err
	}
	out := make([]stages.Record, len(in))
	for i, r := range in {
		var n int64
		v, ok, err := st.Get(r.Key)
		if err != nil {
			return nil, err
		}
		if ok {
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return nil, fmt.Errorf("the count of key %q is %q, not a number: %w", r.Key, v, err)
			}
		}
		n++
		if err := st.Put(r.Key, strconv.AppendInt(nil, n, 10)); err != nil {
			return nil, err
		}
		r.Value = strconv.AppendInt(append(append([]byte(nil), r.Value...), ' '), n, 10)
		out[i] = r
	}
	return out, nil
}

type recorder struct {
	mu    sync.Mutex
	f     *os.File
	delay time.Duration
}

func (r *recorder) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	if r.delay > 0 {
		t := time.NewTimer(r.delay * time.Duration(len(in)))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var b []byte
	for _, rec := range in {
		b = fmt.Appendf(b, "%s %d %d\n", rec.Topic, rec.Partition, rec.Offset)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(b); err != nil {
		return nil, err
	}
	return in, nil
}

func (r *recorder) Close(context.Context) error { return r.f.Close() }
