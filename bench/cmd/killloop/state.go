//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// -state: the stage "count" of internal/testprocessor counts the records
// of each key in the store storeName and appends the new count to each
// value ("id-000000042 7"); the producer spreads its ids over -keys keys
// (id mod keys), so key k's records are known from the ids produced. The
// verdict folds the store's changelog (read_committed, the latest value
// per key) and compares each key's count with its records produced; it
// also checks the counts the outputs carry.

// storeName is the count stage's store in the kill loop.
const storeName = "counts"

// changelogTopic is the store's changelog topic.
func changelogTopic() string { return group + "-" + storeName + "-changelog" }

// stateDir is the state dir of an instance slot: a restarted instance
// finds what its predecessor in the slot left (unless -wipe-state).
func stateDir(dir string, slot int) string {
	return filepath.Join(dir, fmt.Sprintf("state-%c", 'a'+slot))
}

// keyValue is the key of the record with id n among keys keys.
func keyValue(n int64, keys int) []byte { return fmt.Appendf(nil, "key-%05d", n%int64(keys)) }

// parseCounted reads a value of the count stage: an id, a space, the
// key's count after it.
func parseCounted(v []byte) (id, count int64, ok bool) {
	i := bytes.IndexByte(v, ' ')
	if i < 0 {
		return 0, 0, false
	}
	if id, ok = parseID(v[:i]); !ok {
		return 0, 0, false
	}
	count, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
	return id, count, err == nil && count > 0
}

// inputsOfKey is how many of the ids 0..produced-1 have key k.
func inputsOfKey(produced int64, keys, k int) int64 {
	n := produced / int64(keys)
	if int64(k) < produced%int64(keys) {
		n++
	}
	return n
}

// keyTally is what the reader saw of the counts in "out": per key, how
// many outputs carried each count.
type keyTally struct {
	keys int
	seen [][]uint32 // [key][count]
	// every output read, a line each ("partition offset key count id"),
	// for a failed run's post-mortem
	dump bytes.Buffer
}

func newKeyTally(keys int) *keyTally { return &keyTally{keys: keys, seen: make([][]uint32, keys)} }

// add notes an output of key k carrying count n (t.mu held).
func (kt *keyTally) add(k int, n int64) {
	s := kt.seen[k]
	for int64(len(s)) <= n {
		s = append(s, make([]uint32, len(s)+64)...)
	}
	s[n]++
	kt.seen[k] = s
}

// parseOutput reads a record of "out": its id, and with -state the count
// it carries, noted in t.keyed (t.mu held). A record whose key is not
// its id's is not an output of the loop.
func (t *tally) parseOutput(r *kgo.Record) (int64, bool) {
	if t.keyed == nil {
		return parseID(r.Value)
	}
	id, n, ok := parseCounted(r.Value)
	if !ok || !bytes.Equal(r.Key, keyValue(id, t.keyed.keys)) {
		return 0, false
	}
	t.keyed.add(int(id%int64(t.keyed.keys)), n)
	fmt.Fprintf(&t.keyed.dump, "%d %d %s %d %d\n", r.Partition, r.Offset, r.Key, n, id)
	return id, true
}

// folded is a changelog read from its start: the latest value of each
// key, and which partitions each key was written to.
type folded struct {
	count      map[string]int64
	partitions map[string][]int32
	records    int64 // data records read
	bad        []string
	dump       bytes.Buffer // every record read, a line each, for a failed run's post-mortem
}

// foldChangelog reads topic from the start at isolation until it reached
// ends on every partition and folds it: the latest value per key.
func foldChangelog(ctx context.Context, addrs []string, topic string, isolation kgo.IsolationLevel, ends kadm.ListedOffsets) (*folded, error) {
	f := &folded{count: map[string]int64{}, partitions: map[string][]int32{}}
	err := readTo(ctx, addrs, topic, isolation, ends, func(r *kgo.Record) {
		fmt.Fprintf(&f.dump, "%d %d producer %d/%d ", r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch)
		if r.Attrs.IsControl() {
			fmt.Fprintf(&f.dump, "control %x\n", r.Key)
			return
		}
		fmt.Fprintf(&f.dump, "%s %s\n", r.Key, r.Value)
		f.records++
		k := string(r.Key)
		if !slices.Contains(f.partitions[k], r.Partition) {
			f.partitions[k] = append(f.partitions[k], r.Partition)
		}
		if r.Value == nil {
			delete(f.count, k)
			return
		}
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			if len(f.bad) < 5 {
				f.bad = append(f.bad, fmt.Sprintf("%s/%d@%d: key %q value %q", r.Topic, r.Partition, r.Offset, r.Key, r.Value))
			}
			return
		}
		f.count[k] = n
	})
	if err != nil {
		return nil, fmt.Errorf("folding: %w", err)
	}
	return f, nil
}

// restoreEvent is one "state: restored" line of an instance's log.
type restoreEvent struct {
	at        time.Time
	partition int32
	records   int64
	rebuilt   bool
	waited    time.Duration // for transactions open on the changelog to end
}

// restoreFig sums restores.
type restoreFig struct {
	restores, rebuilt int
	records           int64
	waits             int           // restores that waited for open transactions
	longestWait       time.Duration // the longest of those waits
}

func (f *restoreFig) add(e restoreEvent) {
	f.restores++
	f.records += e.records
	if e.rebuilt {
		f.rebuilt++
	}
	if e.waited > 0 {
		f.waits++
		f.longestWait = max(f.longestWait, e.waited)
	}
}

func (f restoreFig) String() string {
	s := fmt.Sprintf("%d records in %d restores", f.records, f.restores)
	if f.rebuilt > 0 {
		s += fmt.Sprintf(" (%d rebuilt)", f.rebuilt)
	}
	if f.waits > 0 {
		s += fmt.Sprintf("; %d waited for open transactions, up to %v", f.waits, f.longestWait.Round(10*time.Millisecond))
	}
	return s
}

// restoredMsg is the processor's log message after a store partition
// restored records (or was rebuilt); its fields say how many.
const restoredMsg = "state: restored"

// readRestores returns the restores logged in an instance's log (the
// console format: time, level, message, then the fields as JSON); ref
// gives the date of the clock times.
func readRestores(r io.Reader, ref time.Time) []restoreEvent {
	var out []restoreEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 4 || !slices.Contains(fields[1:len(fields)-1], restoredMsg) {
			continue
		}
		at, ok := clockTime(fields[0], ref)
		if !ok {
			continue
		}
		var v struct {
			Partition int32  `json:"partition"`
			Records   int64  `json:"records"`
			Rebuilt   bool   `json:"rebuilt"`
			Waited    string `json:"waited_for_open_transactions"`
		}
		if json.Unmarshal([]byte(fields[len(fields)-1]), &v) != nil {
			continue
		}
		waited, _ := time.ParseDuration(v.Waited)
		out = append(out, restoreEvent{at: at, partition: v.Partition, records: v.Records, rebuilt: v.Rebuilt, waited: waited})
	}
	return out
}

// procLog is one instance process of the run: its log, and when it
// started.
type procLog struct {
	name, log string
	started   time.Time
	restores  []restoreEvent
}

// stateResult is the verdict of -state.
type stateResult struct {
	keys                 int
	perKeyMin, perKeyMax int64
	changelogRecords     int64 // the changelog's end offsets (markers included at exactly_once)
	folded               *folded
	exact, under, over   int   // keys
	lost, extra          int64 // counts missing from under-counted keys, counted twice in over-counted ones
	firstWrong           []string
	stray                []string // keys of the changelog that are not the loop's, or in two partitions
	// the outputs: keys whose counts are not 1..N once each; outputs
	// repeating a count of their key; counts of 1..N no output carried;
	// keys whose highest output count is not the changelog's
	badOutputs, lastDiffers int
	repeated, skipped       int64
	firstBadOutputs         []string
	procs                   []*procLog
	before                  restoreFig   // restores before the first restart
	perRestart, byRestarted []restoreFig // per restart: all instances until the next restart; the restarted instance, all its life
	total                   restoreFig
	restarted               bool   // restarts started processes (not pauses)
	dumped                  string // where the changelog as read is, when the verdict failed
}

// wrong reports whether the state fails the guarantee: any key counted
// wrong at exactly_once (or an output count wrong), any key counted
// short at at_least_once.
func (s *stateResult) wrong(guarantee string) bool {
	if guarantee == "exactly_once" {
		return s.under > 0 || s.over > 0 || s.badOutputs > 0 || len(s.stray) > 0
	}
	return s.under > 0 || len(s.stray) > 0
}

// stateVerdict folds the changelog and compares every key's count with
// the records produced with that key; it reads the restores from the
// instances' logs.
func (m *measurement) stateVerdict(ctx context.Context, adm *kadm.Client, t *tally, res *result) (*stateResult, error) {
	o := m.o
	topic := changelogTopic()
	if o.guarantee == "exactly_once" {
		// every transaction ended: the last stable offsets are the ends
		deadline := time.Now().Add(o.txnTimeout + time.Minute)
		for {
			ok, err := stable(ctx, adm, topic)
			if err == nil && ok {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%q still has an open transaction %v after the instances stopped (%v)", topic, o.txnTimeout+time.Minute, err)
			}
			if err := sleep(ctx, 200*time.Millisecond, nil); err != nil {
				return nil, err
			}
		}
	}
	ends, sum, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	isolation := kgo.ReadUncommitted()
	if o.guarantee == "exactly_once" {
		isolation = kgo.ReadCommitted()
	}
	f, err := foldChangelog(ctx, m.addrs, topic, isolation, ends)
	if err != nil {
		return nil, err
	}
	s := &stateResult{keys: o.keys, changelogRecords: sum, folded: f, procs: m.procLogs}
	t.mu.Lock()
	defer t.mu.Unlock()
	s.judge(res.produced, t.keyed, o.guarantee)
	for _, b := range f.bad {
		s.stray = append(s.stray, "not a count: "+b)
	}
	if s.wrong(o.guarantee) {
		// what the verdict read, next to the logs
		s.dumped = filepath.Join(m.dir, "changelog.txt")
		err := os.WriteFile(s.dumped, f.dump.Bytes(), 0o644)
		if t.keyed != nil && err == nil {
			err = os.WriteFile(filepath.Join(m.dir, "outputs.txt"), t.keyed.dump.Bytes(), 0o644)
		}
		if err != nil {
			s.dumped = ""
		}
	}
	for _, p := range m.procLogs {
		if fh, err := os.Open(p.log); err == nil {
			p.restores = readRestores(fh, p.started)
			fh.Close()
		}
	}
	s.attribute(res.restartAt, res.restartProc)
	return s, nil
}

// judge compares the fold and the outputs with the records produced per
// key.
func (s *stateResult) judge(produced int64, kt *keyTally, guarantee string) {
	f := s.folded
	s.perKeyMin, s.perKeyMax = inputsOfKey(produced, s.keys, s.keys-1), inputsOfKey(produced, s.keys, 0)
	wrong := func(format string, a ...any) {
		if len(s.firstWrong) < 5 {
			s.firstWrong = append(s.firstWrong, fmt.Sprintf(format, a...))
		}
	}
	for k := range s.keys {
		key := string(keyValue(int64(k), s.keys))
		want := inputsOfKey(produced, s.keys, k)
		got := f.count[key]
		switch {
		case got == want:
			s.exact++
		case got < want:
			s.under++
			s.lost += want - got
			wrong("%s: %d counted, %d produced", key, got, want)
		default:
			s.over++
			s.extra += got - want
			wrong("%s: %d counted, %d produced", key, got, want)
		}
		if ps := f.partitions[key]; len(ps) > 1 {
			s.stray = append(s.stray, fmt.Sprintf("key %s in changelog partitions %v", key, ps))
		}
		// the outputs of the key
		var seen []uint32
		if kt != nil {
			seen = kt.seen[k]
		}
		var highest, repeated, skipped int64
		for n := int64(1); n < int64(len(seen)); n++ {
			if seen[n] > 0 {
				highest = n
				repeated += int64(seen[n]) - 1
			}
		}
		for n := int64(1); n <= highest; n++ {
			if seen[n] == 0 {
				skipped++
			}
		}
		s.repeated += repeated
		s.skipped += skipped
		if highest != got {
			s.lastDiffers++
		}
		if repeated > 0 || skipped > 0 || highest != want {
			s.badOutputs++
			if len(s.firstBadOutputs) < 5 {
				s.firstBadOutputs = append(s.firstBadOutputs, fmt.Sprintf("%s: highest count %d of %d produced, %d counts repeated, %d skipped", key, highest, want, repeated, skipped))
			}
		}
	}
	for key := range f.count {
		if n, err := strconv.Atoi(strings.TrimPrefix(key, "key-")); err != nil || n < 0 || n >= s.keys || key != string(keyValue(int64(n), s.keys)) {
			s.stray = append(s.stray, fmt.Sprintf("key %q is not one the producer wrote", key))
		}
	}
	if guarantee != "exactly_once" {
		// at least once, repeated and skipped counts are what the
		// guarantee allows; they are reported, not judged
		s.badOutputs = 0
	}
	slices.Sort(s.stray)
}

// attribute sums the restores: before the first restart, in each
// restart's window (every instance, until the next restart), by each
// restarted instance over its life, and in all.
func (s *stateResult) attribute(restartAt []time.Time, restartProc []int) {
	s.perRestart = make([]restoreFig, len(restartAt))
	s.byRestarted = make([]restoreFig, len(restartAt))
	s.restarted = slices.ContainsFunc(restartProc, func(i int) bool { return i >= 0 })
	for i, p := range s.procs {
		for _, e := range p.restores {
			s.total.add(e)
			k := 0 // the restarts that began at or before it
			for k < len(restartAt) && !restartAt[k].After(e.at) {
				k++
			}
			if k == 0 {
				s.before.add(e)
			} else {
				s.perRestart[k-1].add(e)
			}
			if r := slices.Index(restartProc, i); r >= 0 {
				s.byRestarted[r].add(e)
			}
		}
	}
}

// print writes the rows of -state into the report's table; what names a
// restart (kill, restart or pause).
func (s *stateResult) print(row func(name, format string, a ...any), guarantee, what string) {
	row("keys (records produced per key)", "%d (%d to %d)", s.keys, s.perKeyMin, s.perKeyMax)
	row(fmt.Sprintf("changelog `%s`: end offsets (records and markers) / records read", changelogTopic()), "%d / %d", s.changelogRecords, s.folded.records)
	row("keys whose count in the changelog equals their records produced", "%d of %d", s.exact, s.keys)
	row("keys under-counted (records missing from their counts)", "%d (%d)", s.under, s.lost)
	row("keys over-counted (records counted twice)", "%d (%d)", s.over, s.extra)
	if guarantee == "exactly_once" {
		row("keys whose outputs do not carry the counts 1..N once each", "%d", s.badOutputs)
	}
	row("outputs repeating a count of their key / counts no output carried", "%d / %d", s.repeated, s.skipped)
	row("keys whose highest output count is not the changelog's", "%d", s.lastDiffers)
	row("restored from the changelog, all instances (from their logs)", "%s", s.total)
	row("restored before the first "+what, "%s", s.before)
	if !s.restarted {
		return
	}
	var mean float64
	for _, f := range s.byRestarted {
		mean += float64(f.records)
	}
	if n := len(s.byRestarted); n > 0 {
		mean /= float64(n)
	}
	row("restored by the restarted instance (mean per "+what+")", "%.0f records", mean)
}

// printLines writes the per-restart and per-process restores, and what
// was wrong.
func (s *stateResult) printLines(w io.Writer, what string) {
	records := func(fs []restoreFig) []int64 {
		out := make([]int64, len(fs))
		for i, f := range fs {
			out[i] = f.records
		}
		return out
	}
	fmt.Fprintf(w, "records restored per %s, all instances until the next: %v\n", what, records(s.perRestart))
	if s.restarted {
		fmt.Fprintf(w, "records restored per %s, by the restarted instance in its life: %v\n", what, records(s.byRestarted))
	}
	var per []string
	for _, p := range s.procs {
		var f restoreFig
		for _, e := range p.restores {
			f.add(e)
		}
		per = append(per, fmt.Sprintf("%s %d/%d", p.name, f.records, f.restores))
	}
	fmt.Fprintf(w, "records/restores per instance process: %s\n", strings.Join(per, ", "))
	if len(s.firstWrong) > 0 {
		fmt.Fprintf(w, "first keys counted wrong: %s\n", strings.Join(s.firstWrong, "; "))
	}
	if len(s.firstBadOutputs) > 0 {
		fmt.Fprintf(w, "first keys whose outputs are wrong: %s\n", strings.Join(s.firstBadOutputs, "; "))
	}
	for _, st := range s.stray {
		fmt.Fprintf(w, "changelog: %s\n", st)
	}
	if s.dumped != "" {
		fmt.Fprintf(w, "the changelog as read (partition offset producer id/epoch key value): %s; the outputs as read (partition offset key count id): outputs.txt next to it\n", s.dumped)
	}
}
