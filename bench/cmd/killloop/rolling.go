//go:build unix

package main

// What a rolling restart is measured with besides duplicates: the
// assignment of every instance over time, the gaps of each restart's
// window against a baseline window before the first restart, and the
// phases of each restart (from the instances' logs).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// assignedGauge is the processor's gauge of partitions assigned now (the
// franz worker serves it too).
const assignedGauge = "fencepost_assigned_partitions"

// assignSample is how many partitions each instance slot had at a
// moment (-1: unknown, the instance was down or did not answer).
type assignSample struct {
	at time.Time
	n  []int64
}

// sampler records every instance's assignment every interval.
type sampler struct {
	mu      sync.Mutex
	samples []assignSample
}

// run samples until ctx ends.
func (s *sampler) run(ctx context.Context, inst []*instance, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n := make([]int64, len(inst))
		for i, in := range inst {
			n[i] = scrapeCounter(in.httpAddr(), assignedGauge)
		}
		s.mu.Lock()
		s.samples = append(s.samples, assignSample{at: time.Now(), n: n})
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// between returns the samples taken in [from, to).
func (s *sampler) between(from, to time.Time) []assignSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []assignSample
	for _, x := range s.samples {
		if !x.at.Before(from) && x.at.Before(to) {
			out = append(out, x)
		}
	}
	return out
}

// assignmentChanges keeps the first sample and every sample that differs
// from the one before it.
func assignmentChanges(samples []assignSample) []assignSample {
	var out []assignSample
	for i, x := range samples {
		if i == 0 || !slices.Equal(x.n, samples[i-1].n) {
			out = append(out, x)
		}
	}
	return out
}

// formatAssignment writes counts as "21/21/22", "-" for unknown.
func formatAssignment(n []int64) string {
	parts := make([]string, len(n))
	for i, v := range n {
		if v < 0 {
			parts[i] = "-"
		} else {
			parts[i] = fmt.Sprint(v)
		}
	}
	return strings.Join(parts, "/")
}

// restartRecord is what happened at one restart of a rolling run.
type restartRecord struct {
	slot                    int
	oldLog, newLog          string
	term, exited, started   time.Time
	windowEnd               time.Time
	before, after           []int64 // each slot's partitions just before SIGTERM, at the window's end
	revokedByOthers         int64
	changes                 []assignSample // the assignment's changes in the window
	oldPhases, newPhases    map[string]time.Time
	stalls                  []windowStall // per input partition, in [term, term+interval)
	pauseEnd                time.Time     // when the longest pause of the window ended
	longest                 time.Duration
	windowTotal, windowP99  time.Duration
	firstPartitionsAtNewPID time.Time // when the restarted instance first had partitions (zero: not seen)
}

// The log lines whose times make a restart's phases: the old process's
// and the new one's (the processor's messages; the franz worker writes
// the same).
var (
	oldPhaseMsgs = []string{"signal received", "stopped"}
	newPhaseMsgs = []string{"starting", "joined the consumer group", "generation started", "partitions assigned"}
)

// logTimes returns, for each of msgs, the time of the first line of the
// log (the processor's console format: "15:04:05.000<TAB>LEVEL<TAB>msg...")
// whose message starts with it, at or after notBefore; ref gives the
// date (the clock time nearest to it).
func logTimes(r io.Reader, msgs []string, ref, notBefore time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), "\t", 4)
		if len(fields) < 3 {
			continue
		}
		at, ok := clockTime(fields[0], ref)
		if !ok || at.Before(notBefore) {
			continue
		}
		for _, m := range msgs {
			if _, seen := out[m]; !seen && strings.HasPrefix(fields[2], m) {
				out[m] = at
			}
		}
	}
	return out
}

// clockTime reads "15:04:05.000" as the moment of that clock time
// nearest to ref (in ref's location).
func clockTime(s string, ref time.Time) (time.Time, bool) {
	c, err := time.Parse("15:04:05.000", s)
	if err != nil {
		return time.Time{}, false
	}
	y, mo, d := ref.Date()
	at := time.Date(y, mo, d, c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), ref.Location())
	switch {
	case at.Sub(ref) > 12*time.Hour:
		at = at.AddDate(0, 0, -1)
	case ref.Sub(at) > 12*time.Hour:
		at = at.AddDate(0, 0, 1)
	}
	return at, true
}

// readLogTimes is logTimes on a file; an unreadable file gives none.
func readLogTimes(path string, msgs []string, ref, notBefore time.Time) map[string]time.Time {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return logTimes(f, msgs, ref, notBefore)
}

// summarize reduces one window's per-partition stalls: the total of all
// partitions, the p99 of one partition's total, the longest gap and when
// it ended.
func summarize(ws []windowStall) (total, p99, longest time.Duration, endedAt time.Time) {
	if len(ws) == 0 {
		return 0, 0, 0, time.Time{}
	}
	per := make([]time.Duration, len(ws))
	for i, s := range ws {
		total += s.total
		per[i] = s.total
		if s.longest > longest {
			longest, endedAt = s.longest, s.endedAt
		}
	}
	slices.Sort(per)
	p99 = per[min(len(per)-1, len(per)*99/100)]
	return total, p99, longest, endedAt
}

// since formats the time from origin to t as "+1.23s", "?" if t is zero.
func since(origin, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return fmt.Sprintf("%+.2fs", t.Sub(origin).Seconds())
}

// printRolling writes the rolling restart's assignment, baseline and
// per-restart figures.
func (r *result) printRolling(w io.Writer, o options) {
	if len(r.restarts) == 0 {
		return
	}
	bt, bp, bl, _ := summarize(r.baseline)
	var rt, rl time.Duration
	for _, rr := range r.restarts {
		rt += rr.windowTotal
		rl = max(rl, rr.longest)
	}
	mean := rt / time.Duration(len(r.restarts))
	fmt.Fprintf(w, "\ntime partitions were not processing, in windows of %v (gaps over %v, summed over %d partitions):\n\n", o.interval, stallAfter(o), o.partitions)
	fmt.Fprintf(w, "| window | total | p99 of one partition | longest gap |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| baseline: the %v before the first restart | %v | %v | %v |\n", o.interval, rnd(bt), rnd(bp), rnd(bl))
	for k, rr := range r.restarts {
		fmt.Fprintf(w, "| restart %d (%c): the %v from its SIGTERM | %v | %v | %v |\n", k+1, 'a'+rr.slot, o.interval, rnd(rr.windowTotal), rnd(rr.windowP99), rnd(rr.longest))
	}
	fmt.Fprintf(w, "\ncost of one restart (mean restart window − baseline): %v of partition time; longest gap %v (baseline %v)\n", rnd(mean-bt), rnd(rl), rnd(bl))
	fmt.Fprintf(w, "\nper restart (times from its SIGTERM; assignment as partitions of a/b/c...):\n")
	for k, rr := range r.restarts {
		fmt.Fprintf(w, "- restart %d (%c): exited %s, started %s", k+1, 'a'+rr.slot, since(rr.term, rr.exited), since(rr.term, rr.started))
		for _, m := range oldPhaseMsgs {
			if t, ok := rr.oldPhases[m]; ok {
				fmt.Fprintf(w, "; old %q %s", m, since(rr.term, t))
			}
		}
		for _, m := range newPhaseMsgs {
			if t, ok := rr.newPhases[m]; ok {
				fmt.Fprintf(w, "; new %q %s", m, since(rr.term, t))
			}
		}
		fmt.Fprintf(w, "; longest pause %v ended %s", rnd(rr.longest), since(rr.term, rr.pauseEnd))
		fmt.Fprintf(w, "; restarted instance had partitions %s\n", since(rr.term, rr.firstPartitionsAtNewPID))
		fmt.Fprintf(w, "  assignment before %s, after %s (%v later); changes:", formatAssignment(rr.before), formatAssignment(rr.after),
			rr.windowEnd.Sub(rr.term).Round(100*time.Millisecond))
		for _, c := range rr.changes {
			fmt.Fprintf(w, " %s %s", since(rr.term, c.at), formatAssignment(c.n))
		}
		fmt.Fprintln(w)
	}
}

func rnd(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
