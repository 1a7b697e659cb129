//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// -window: the instances run the built-in stages json, aggregate and
// produce: a count per user in tumbling windows of event time (the
// record timestamp), emitted when each window closes. The producer
// writes {"id":42,"user":"u-00042"} (the user: id mod -keys) keyed by
// the id, so the aggregate's key: json.user is a new grouping and its
// records go through the repartition topic repartitionTopic first. The
// outputs are per window, not per id: the verdict replays the
// repartition topic (read_committed at exactly_once: what the aggregate
// processed, once) with the aggregate's rule for windows, and compares
// the windows emitted to "out" with the windows that replay closes.

// windowStore is the aggregate's store in the loop (its changelog is
// killloop-windows-changelog).
const windowStore = "windows"

// repartitionTopic is the aggregate's repartition topic.
func repartitionTopic() string { return group + "-by-" + windowStore + "-repartition" }

// userOf is the user of the record with id n among users users.
func userOf(n int64, users int) string { return fmt.Sprintf("u-%05d", n%int64(users)) }

// loopValue is the value of an input record of -window.
type loopValue struct {
	ID   *int64  `json:"id"`
	User *string `json:"user"`
}

// windowInput returns the input record with id n: keyed by its id, its
// value the id and its user.
func windowInput(users int) func(n int64) (key, value []byte) {
	return func(n int64) ([]byte, []byte) {
		return idValue(n), fmt.Appendf(nil, `{"id":%d,"user":%q}`, n, userOf(n, users))
	}
}

// parseInput reads an input value of -window (also the value of the
// repartition topic's records, which the stages before the aggregate do
// not change).
func parseInput(v []byte) (id int64, user string, ok bool) {
	var lv loopValue
	if json.Unmarshal(v, &lv) != nil || lv.ID == nil || lv.User == nil || *lv.ID < 0 {
		return 0, "", false
	}
	return *lv.ID, *lv.User, true
}

// writeWindowPipeline writes the pipeline of -window: json, aggregate by
// user in tumbling windows emitted on close, produce to "out".
func writeWindowPipeline(b *strings.Builder, o options) {
	fmt.Fprintf(b, `  - stage: json
    require: [id, user]
  - stage: aggregate
    store: %s
    key: json.user
    window:
      type: tumbling
      size: %v
      grace: %v
    fields:
      n: count()
      id_sum: sum(json.id)
      first_id: first(json.id)
      last_id: last(json.id)
    emit: on_close
`, windowStore, o.windowSize, o.windowGrace)
}

// windowOutput is a value of "out" under -window: the aggregate's output
// of a closed window.
type windowOutput struct {
	Key   *string `json:"key"`
	N     *int64  `json:"n"`
	IDSum *int64  `json:"id_sum"`
	First *int64  `json:"first_id"`
	Last  *int64  `json:"last_id"`
	Start *string `json:"window_start"`
	End   *string `json:"window_end"`
}

// parseWindowOutput reads an output record: its window and fields. The
// record key must be the user, and the window one of size, aligned.
func parseWindowOutput(key, v []byte, size int64) (windowKey, windowAgg, error) {
	var o windowOutput
	d := json.NewDecoder(bytes.NewReader(v))
	d.DisallowUnknownFields()
	if err := d.Decode(&o); err != nil {
		return windowKey{}, windowAgg{}, fmt.Errorf("not the aggregate's output: %v", err)
	}
	if o.Key == nil || o.N == nil || o.IDSum == nil || o.First == nil || o.Last == nil || o.Start == nil || o.End == nil {
		return windowKey{}, windowAgg{}, fmt.Errorf("lacks one of key, n, id_sum, first_id, last_id, window_start, window_end")
	}
	if *o.Key != string(key) {
		return windowKey{}, windowAgg{}, fmt.Errorf("record key %q, value key %q", key, *o.Key)
	}
	start, err1 := time.Parse(time.RFC3339Nano, *o.Start)
	end, err2 := time.Parse(time.RFC3339Nano, *o.End)
	if err1 != nil || err2 != nil {
		return windowKey{}, windowAgg{}, fmt.Errorf("window times %q and %q are not RFC 3339", *o.Start, *o.End)
	}
	s, e := start.UnixMilli(), end.UnixMilli()
	if e-s != size || s%size != 0 {
		return windowKey{}, windowAgg{}, fmt.Errorf("window [%s, %s) is not a tumbling window of %v", *o.Start, *o.End, time.Duration(size)*time.Millisecond)
	}
	return windowKey{*o.Key, s}, windowAgg{n: *o.N, idSum: *o.IDSum, first: *o.First, last: *o.Last}, nil
}

// windowResult is the verdict of -window.
type windowResult struct {
	rule     windowRule
	users    int
	produced int64
	// the input as read: its records, those that are not the loop's;
	// ids it holds more than once (a producer retry the broker did not
	// deduplicate), ids produced it lacks
	inRecords, inStray, inDuplicated, inAbsent int64
	// the repartition topic: checked against the input; records that
	// are not an input of the loop; records of aborted transactions
	rep                  repartitionFig
	repStray, repAborted int64
	replay               *replayed
	judged               windowJudged
	// "out": its records (read_committed at exactly_once), those that
	// are not a window of the loop, those of aborted transactions
	outRecords, outStray, outAborted int64
	strays                           []string // the first records that are not the loop's
	restores                         restoreFig
	dumped                           string // where the topics as read are, when the verdict failed or with -keep
}

// wrong reports whether the run fails the guarantee: a record that is
// not the loop's, the repartition topic not the input (every input
// record in it, at exactly_once once, at at_least_once at least once;
// with its timestamp; each user on one partition), or the windows
// emitted wrong (see windowJudged.wrong).
func (w *windowResult) wrong(guarantee string) bool {
	r := w.rep
	bad := w.inStray > 0 || w.repStray > 0 || w.outStray > 0 || r.missing > 0 || r.timeDiffers > 0 || r.splitUsers > 0 || w.judged.wrong(guarantee)
	if guarantee == "exactly_once" {
		bad = bad || r.repeated > 0
	}
	return bad
}

// windowVerdict reads "in", the repartition topic and "out" to their
// ends once every transaction on them ended, replays the repartition
// topic and judges the windows emitted. It reads the restores from the
// instances' logs.
func (m *measurement) windowVerdict(ctx context.Context, adm *kadm.Client, produced int64) (*windowResult, error) {
	o := m.o
	// (max_future: the aggregate's default, as the config leaves it)
	w := &windowResult{rule: windowRule{size: o.windowSize.Milliseconds(), grace: o.windowGrace.Milliseconds(), maxFuture: (24 * time.Hour).Milliseconds()},
		users: o.keys, produced: produced}
	isolation := kgo.ReadUncommitted()
	if o.guarantee == "exactly_once" {
		isolation = kgo.ReadCommitted()
		for _, topic := range []string{repartitionTopic(), outputT} {
			if err := waitStable(ctx, adm, topic, o.txnTimeout+time.Minute); err != nil {
				return nil, err
			}
		}
	}
	var stray bytes.Buffer // the records that are not the loop's
	noteStray := func(r *kgo.Record, why string) {
		if len(w.strays) < 5 {
			w.strays = append(w.strays, fmt.Sprintf("%s/%d@%d: %s", r.Topic, r.Partition, r.Offset, why))
		}
		fmt.Fprintf(&stray, "%s %d %d %s %q %q\n", r.Topic, r.Partition, r.Offset, why, r.Key, r.Value)
	}

	// the input: each id's copies and timestamp
	in := newInputRecords(produced)
	err := m.readAll(ctx, adm, inputT, kgo.ReadUncommitted(), func(r *kgo.Record) {
		w.inRecords++
		id, _, ok := parseInput(r.Value)
		if !ok || !bytes.Equal(r.Key, idValue(id)) || id >= produced {
			w.inStray++
			noteStray(r, "not an input of the loop")
			return
		}
		in.add(id, r.Timestamp.UnixMilli())
	})
	if err != nil {
		return nil, err
	}
	w.inDuplicated, w.inAbsent = in.duplicated()

	// the repartition topic, as the aggregate read it
	var dump bytes.Buffer
	parts := map[int32][]windowRecord{}
	var repRecords int64
	err = m.readAll(ctx, adm, repartitionTopic(), isolation, func(r *kgo.Record) {
		repRecords++
		id, user, ok := parseInput(r.Value)
		fmt.Fprintf(&dump, "%d %d %d %s %s\n", r.Partition, r.Offset, r.Timestamp.UnixMilli(), r.Key, r.Value)
		switch {
		case !ok || id >= produced:
			w.repStray++
			noteStray(r, "not an input of the loop")
		case string(r.Key) != user:
			w.repStray++
			noteStray(r, "not keyed by its user")
		default:
			parts[r.Partition] = append(parts[r.Partition], windowRecord{user: user, at: r.Timestamp.UnixMilli(), id: id})
		}
	})
	if err != nil {
		return nil, err
	}
	w.rep = checkRepartition(in, parts)
	w.replay = w.rule.replay(parts)

	// the windows emitted
	var outDump bytes.Buffer
	emitted := map[windowKey][]windowAgg{}
	err = m.readAll(ctx, adm, outputT, isolation, func(r *kgo.Record) {
		w.outRecords++
		fmt.Fprintf(&outDump, "%d %d %s %s\n", r.Partition, r.Offset, r.Key, r.Value)
		k, a, err := parseWindowOutput(r.Key, r.Value, w.rule.size)
		if err != nil {
			w.outStray++
			noteStray(r, err.Error())
			return
		}
		emitted[k] = append(emitted[k], a)
	})
	if err != nil {
		return nil, err
	}
	w.judged = judgeWindows(w.replay.closed, emitted)

	if o.guarantee == "exactly_once" {
		// what read_committed readers never saw: aborted writes
		all, err := m.countAll(ctx, adm, repartitionTopic())
		if err != nil {
			return nil, err
		}
		w.repAborted = all - repRecords
		if all, err = m.countAll(ctx, adm, outputT); err != nil {
			return nil, err
		}
		w.outAborted = all - w.outRecords
	}
	for _, p := range m.procLogs {
		if fh, err := os.Open(p.log); err == nil {
			for _, e := range readRestores(fh, p.started) {
				w.restores.add(e)
			}
			fh.Close()
		}
	}
	if w.wrong(o.guarantee) || o.keep {
		// what the verdict read, next to the logs
		var exp bytes.Buffer
		for k, a := range w.replay.closed {
			fmt.Fprintf(&exp, "%s %d %d %d %d %d\n", k.user, k.start, a.n, a.idSum, a.first, a.last)
		}
		w.dumped = m.dir
		for name, b := range map[string]*bytes.Buffer{"repartition.txt": &dump, "outputs.txt": &outDump, "expected.txt": &exp, "strays.txt": &stray} {
			if err := os.WriteFile(filepath.Join(m.dir, name), b.Bytes(), 0o644); err != nil {
				w.dumped = ""
			}
		}
	}
	return w, nil
}

// readAll reads topic from its start to its end offsets now, at
// isolation, and calls fn with each data record, in offset order per
// partition.
func (m *measurement) readAll(ctx context.Context, adm *kadm.Client, topic string, isolation kgo.IsolationLevel, fn func(*kgo.Record)) error {
	ends, _, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return err
	}
	return readTo(ctx, m.addrs, topic, isolation, ends, func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			fn(r)
		}
	})
}

// countAll counts the data records of topic, read uncommitted: those of
// aborted transactions too.
func (m *measurement) countAll(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	var n int64
	err := m.readAll(ctx, adm, topic, kgo.ReadUncommitted(), func(*kgo.Record) { n++ })
	return n, err
}

// waitStable waits until topic has no open transaction, at most within.
func waitStable(ctx context.Context, adm *kadm.Client, topic string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := stable(ctx, adm, topic)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q still has an open transaction %v after the instances stopped (%v); a killed instance's transaction should end by -transaction-timeout", topic, within, err)
		}
		if err := sleep(ctx, 200*time.Millisecond, nil); err != nil {
			return err
		}
	}
}

// print writes the rows of -window into the report's table.
func (w *windowResult) print(row func(name, format string, a ...any), guarantee string) {
	r := w.rep
	row("records produced to `in` / read from it", "%d / %d", w.produced, w.inRecords)
	row("ids `in` holds more than once / not at all (the input's own duplicates and losses)", "%d / %d", w.inDuplicated, w.inAbsent)
	row("users (records produced per user)", "%d (%d to %d)", w.users, inputsOfKey(w.produced, w.users, w.users-1), inputsOfKey(w.produced, w.users, 0))
	row(fmt.Sprintf("repartition `%s`: records read", repartitionTopic()), "%d", r.records+w.repStray)
	row("input records missing from the repartition topic", "%d", r.missing)
	row("ids in the repartition topic more often than in `in` (records too many)", "%d (%d)", r.repeated, r.copies)
	row("repartition records whose timestamp is not their input's", "%d", r.timeDiffers)
	row("users on more than one repartition partition", "%d", r.splitUsers)
	row("records that are not the loop's (`in` / repartition / `out`)", "%d / %d / %d", w.inStray, w.repStray, w.outStray)
	row("records counted in a window (replayed)", "%d", w.replay.counted)
	row("late records dropped (replayed)", "%d", w.replay.late)
	row("windows expected (closed by their partition's final stream time)", "%d", w.judged.expected)
	row("windows still open at the end (not expected)", "%d", w.replay.open)
	row("records in `out`", "%d", w.outRecords)
	row("windows emitted once with the exact count", "%d of %d", w.judged.exact, w.judged.expected)
	row("windows missing", "%d", w.judged.missing)
	row("windows emitted more than once (copies)", "%d (%d)", w.judged.repeated, w.judged.copies)
	row("windows under-counted", "%d", w.judged.under)
	row("windows over-counted", "%d", w.judged.over)
	row("windows with the expected count of other records (id_sum, first_id or last_id)", "%d", w.judged.otherRecords)
	row("windows emitted but not expected", "%d", w.judged.unexpected)
	if guarantee == "exactly_once" {
		row("records of aborted transactions (repartition / `out`, read uncommitted, not committed)", "%d / %d", w.repAborted, w.outAborted)
	}
	row("restored from the changelog, all instances (from their logs)", "%s", w.restores)
}

// printLines writes what was wrong, and where the topics as read are.
func (w *windowResult) printLines(wr io.Writer) {
	if len(w.judged.firstWrong) > 0 {
		fmt.Fprintf(wr, "first windows emitted wrong: %s\n", strings.Join(w.judged.firstWrong, "; "))
	}
	if len(w.rep.first) > 0 {
		fmt.Fprintf(wr, "repartition topic: %s\n", strings.Join(w.rep.first, "; "))
	}
	if len(w.strays) > 0 {
		fmt.Fprintf(wr, "records that are not the loop's: %s\n", strings.Join(w.strays, "; "))
	}
	if w.dumped != "" {
		fmt.Fprintf(wr, "as read, in %s: repartition.txt (partition offset timestamp key value), outputs.txt (partition offset key value), expected.txt (user start n id_sum first_id last_id), strays.txt\n", w.dumped)
	}
}

// printWindows writes the report of -window: the figures as a Markdown
// table, then what was wrong and the settings.
func (r *result) printWindows(w io.Writer, o options, args []string) {
	fmt.Fprintf(w, "| figure | value |\n|---|---|\n")
	row := func(name string, format string, a ...any) {
		fmt.Fprintf(w, "| %s | %s |\n", name, fmt.Sprintf(format, a...))
	}
	r.windows.print(row, o.guarantee)
	row("kills (SIGKILL)", "%d", len(r.restartAt))
	if bk := r.brokerKill; bk != nil {
		row("broker node killed (SIGKILL, once), down until it served again", "%s, %v", bk.name(), bk.down.Round(100*time.Millisecond))
	}
	fmt.Fprintln(w)
	r.windows.printLines(w)
	r.printFooter(w, o, args, len(r.restartAt), "kill")
}
