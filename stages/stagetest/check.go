package stagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fencepost-dev/fencepost/internal/engine/process"
	"github.com/fencepost-dev/fencepost/stages"
)

// checker watches every stage call of a run, independently of the
// chain and scheduler it checks, and finds broken promises of the record
// path:
//
//   - a mark passes a source record that some stage did not finish: the
//     records derived from it that stage k-1 emitted (in calls that
//     succeeded for them) are not all consumed by stage k (in calls that
//     succeeded for them), and the source record was not dead-lettered by
//     stage k or an earlier one (a dead letter is the source record, written
//     once: it stands for every record derived from it that fails);
//   - two stage calls hold records with the same key of one partition
//     at once.
//
// A record counts as derived from the source record whose offset it
// carries (stages.Record.Offset); a record carrying no offset of its
// partition's input is not attributed, and not checked.
type checker struct {
	names []string

	mu         sync.Mutex
	sources    map[Partition][]int64
	emitted    []map[source]int // by stage; [0] is the input
	consumed   []map[source]int // by stage; [0] unused
	dead       []map[source]int // by stage; [0] unused
	running    map[runningKey]int
	violations []string
}

type source struct {
	tp     Partition
	offset int64
}

type runningKey struct {
	tp  Partition
	key string
}

func newChecker(named []NamedStage) *checker {
	c := &checker{sources: map[Partition][]int64{}, running: map[runningKey]int{}}
	for range len(named) + 1 {
		c.emitted = append(c.emitted, map[source]int{})
		c.consumed = append(c.consumed, map[source]int{})
		c.dead = append(c.dead, map[source]int{})
	}
	for _, n := range named {
		c.names = append(c.names, n.Name)
	}
	return c
}

func (c *checker) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

// inputs records tp's source records (sorted by offset).
func (c *checker) inputs(tp Partition, records []stages.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range records {
		c.sources[tp] = append(c.sources[tp], r.Offset)
		c.emitted[0][source{tp, r.Offset}]++
	}
}

// attribute returns the source record r derives from.
func (c *checker) attribute(r stages.Record) (source, bool) {
	tp := Partition{Topic: r.Topic, Partition: r.Partition}
	_, ok := slices.BinarySearch(c.sources[tp], r.Offset)
	return source{tp, r.Offset}, ok
}

// wrap returns the stages, each watched by the checker.
func (c *checker) wrap(named []NamedStage) []process.NamedStage {
	out := make([]process.NamedStage, len(named))
	for i, n := range named {
		out[i] = process.NamedStage{Name: n.Name, Stage: &watched{c: c, k: i + 1, inner: n.Stage}}
	}
	return out
}

type watched struct {
	c     *checker
	k     int // stage number, from 1
	inner stages.Stage
}

func (w *watched) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	keys := w.c.enter(in)
	defer w.c.leave(keys)
	out, err := w.inner.Process(ctx, in)
	w.c.called(w.k, in, out, err)
	return out, err
}

// enter records the keys a call holds, and reports a key already held.
func (c *checker) enter(in []stages.Record) []runningKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []runningKey
	for _, r := range in {
		k := runningKey{Partition{Topic: r.Topic, Partition: r.Partition}, string(r.Key)}
		if slices.Contains(keys, k) {
			continue
		}
		keys = append(keys, k)
		if c.running[k]++; c.running[k] == 2 {
			c.violate("records with key %q of %s were in two stage calls at once (key order is not kept)", k.key, k.tp)
		}
	}
	return keys
}

func (c *checker) leave(keys []runningKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.running[k]--; c.running[k] == 0 {
			delete(c.running, k)
		}
	}
}

// called records what stage k finished in one call: every input on
// success; with a *stages.RecordErrors the inputs it does not fail.
func (c *checker) called(k int, in, out []stages.Record, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var re *stages.RecordErrors
	switch {
	case err == nil:
	case errors.As(err, &re) && re.Consistent(len(in)):
		out = re.Out
	default:
		return
	}
	for i, r := range in {
		if re != nil {
			if _, failed := re.Errs[i]; failed {
				continue
			}
		}
		if s, ok := c.attribute(r); ok {
			c.consumed[k][s]++
		}
	}
	if k < len(c.emitted) {
		for _, r := range out {
			if s, ok := c.attribute(r); ok {
				c.emitted[k][s]++
			}
		}
	}
}

// deadLettered records a dead letter, by the stage it names.
func (c *checker) deadLettered(tp Partition, r stages.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, _ := r.Header(stages.HeaderErrorStage)
	off, _ := r.Header(stages.HeaderSourceOffset)
	o, err := strconv.ParseInt(string(off), 10, 64)
	if err != nil {
		return
	}
	if k := slices.Index(c.names, string(name)); k >= 0 {
		c.dead[k+1][source{tp, o}]++
	}
}

// checkMark reports source records below mark that a stage did not
// finish.
func (c *checker) checkMark(tp Partition, mark int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.sources[tp] {
		if o >= mark {
			break
		}
		s := source{tp, o}
		dead := 0
		for k := 1; k < len(c.emitted); k++ {
			want, got := c.emitted[k-1][s], c.consumed[k][s]
			dead += c.dead[k][s]
			if got < want && dead == 0 {
				c.violate("the mark %d of %s passes the record at offset %d, but stage %q finished %d of the %d record(s) it was handed for it, and the record was not dead-lettered",
					mark, tp, o, c.names[k-1], got, want)
				break
			}
		}
	}
}

func joinLines(lines []string) string { return strings.Join(lines, "\n  ") }
