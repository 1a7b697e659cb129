package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// OptionType is the type of a stage option's value in a configuration
// file.
type OptionType string

// Option types. Expr is a string holding an expression (see package
// builtin for the language); it is compiled when the stage is built, so a
// bad expression fails the configuration, not a record.
const (
	TypeString     OptionType = "string"
	TypeInt        OptionType = "int"
	TypeBool       OptionType = "bool"
	TypeDuration   OptionType = "duration"
	TypeExpr       OptionType = "expr"
	TypeStringList OptionType = "[]string"
	TypeStringMap  OptionType = "map[string]string"
)

// OptionSpec documents one option of a stage. Config parsing, the lint
// command and the "stages" listing all read it: one source of truth.
type OptionSpec struct {
	Name     string
	Type     OptionType
	Required bool
	// Default is the value when the option is absent (nil: none). Its
	// Go type matches Type: string, int, bool, time.Duration, []string,
	// map[string]string.
	Default any
	Doc     string
	// Enum, if set, lists the allowed values of a string option.
	Enum []string
}

// Spec describes a stage that configuration files can name.
type Spec struct {
	// Name is the stage's name in configuration files: lower case,
	// [a-z0-9_].
	Name string
	// Summary is one line for the stage listing.
	Summary string
	// Options the stage accepts; any other key is an error.
	Options []OptionSpec
	// ExactlyOnce declares that the stage takes part in exactly-once
	// (a pipeline with guarantee: exactly_once): its only effects are
	// the records Process returns and the records it writes through
	// Env.Producer. The pipeline writes those in a Kafka transaction with
	// the consumed offsets, so an aborted transaction takes them back and
	// the records are processed again from the committed offsets.
	//
	// Set it only if the stage keeps that contract: it writes nowhere
	// else (standard output, files, databases, HTTP calls, a Kafka client
	// of its own), and its outputs do not depend on state it keeps from
	// one Process call to the next (the same stage value processes the
	// records of an aborted transaction again). Logging through Env.Log
	// does not count: logs are diagnostics, not outputs.
	//
	// The zero value, false, means the stage's effects outside its output
	// records are at-least-once: repeated after a crash or an aborted
	// transaction. Such a stage still runs under exactly_once (lint warns
	// about it, and the stages listing says so); the records it returns
	// and writes through Env.Producer are still in the transaction.
	ExactlyOnce bool
	// New builds the stage. opts holds every option of Options, checked
	// and with defaults applied. An error about one option should be an
	// *OptionError so it is reported at that option's position. It is
	// called through Build, so env.Log and env.Stdout are never nil.
	New func(opts Options, env Env) (Stage, error)
}

// Build calls s.New with env completed: a nil Log becomes NopLogger, a
// nil Stdout io.Discard and a nil Counter one whose counters count
// nowhere, so a factory never checks them. The processor, the
// configuration loader and stagetest build every stage through it.
func (s Spec) Build(opts Options, env Env) (Stage, error) {
	if env.Log == nil {
		env.Log = NopLogger
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	env.Counter = counterFunc(env.Counter)
	return s.New(opts, env)
}

// Env is what a stage factory may use from the pipeline it runs in.
type Env struct {
	// Log is the pipeline's logger, naming the stage in each message.
	// Never nil in a factory called through Spec.Build (NopLogger when
	// none was given).
	Log Logger
	// Stdout is where printing stages write (the process's standard
	// output in the binary, a buffer in tests; never nil through
	// Spec.Build, io.Discard when none was given). It is safe for
	// concurrent use: write a whole line with one Write and it lands
	// whole, whatever other partitions print meanwhile.
	Stdout io.Writer
	// Producer returns a producer to a topic of the pipeline's cluster
	// (acks=all), shared by stages writing to the same topic. When a
	// configuration is checked without a cluster (lint), it records the
	// topic (where the stage writes) and returns a producer that refuses
	// every write. nil where none is available (a stage built by hand).
	Producer func(topic string) (Producer, error)
	// Counter returns the Counter of one kind of event of the stage,
	// named by event: 1 to 64 of a-z, 0-9 and _, starting with a letter,
	// and fixed by the stage (never taken from record data), such as
	// late_records_dropped. Ask for each in the factory, once. The
	// processor exports the counts as
	// fencepost_stage_events_total{stage="<the stage's name>",
	// event="<event>"}, at 0 from the start; stagetest.Counters keeps
	// them for a test. Through Spec.Build it is never nil (with none
	// given, as in lint, its counters count nowhere) and it panics on a
	// bad event name, which the configuration loader reports as a bug
	// of the stage.
	Counter func(event string) Counter
}

// Producer writes records to a Kafka topic. Produce returns nil only
// once every record is acknowledged by all in-sync replicas.
type Producer interface {
	Produce(ctx context.Context, records []Record) error
}

// OptionError is an error about one option of a stage.
type OptionError struct {
	Option string
	Err    error
}

func (e *OptionError) Error() string { return fmt.Sprintf("option %q: %v", e.Option, e.Err) }
func (e *OptionError) Unwrap() error { return e.Err }

// Registry maps stage names to their specs. It is safe for concurrent
// use. Most programs use Default through Register and Lookup.
type Registry struct {
	mu    sync.RWMutex
	specs map[string]Spec
}

// Default is the registry configuration files are resolved against.
var Default = &Registry{}

// ErrDuplicate is returned when a stage name is registered twice.
var ErrDuplicate = errors.New("stage name already registered")

// Register adds a spec. It fails if the name is taken or the spec is
// wrong (see Spec.Validate).
func (r *Registry) Register(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = map[string]Spec{}
	}
	if _, ok := r.specs[s.Name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, s.Name)
	}
	r.specs[s.Name] = s
	return nil
}

// Lookup returns the spec registered under name.
func (r *Registry) Lookup(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.specs[name]
	return s, ok
}

// Specs returns every registered spec, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Register adds a spec to the Default registry; it panics on error, as a
// registration mistake is a programming error found at start-up (call it
// from init or main).
func Register(s Spec) {
	if err := Default.Register(s); err != nil {
		panic(err)
	}
}
