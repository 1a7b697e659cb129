package pipeline

import (
	"testing"

	"github.com/fencepost-dev/fencepost/internal/engine/commit"
	"github.com/fencepost-dev/fencepost/internal/engine/fetch"
	"github.com/fencepost-dev/fencepost/internal/engine/offsets"
	"github.com/fencepost-dev/fencepost/internal/engine/resolve"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// sendLeaders delivers metadata: tp0 led by leader in leaderEpoch.
func (h *coordHarness) sendLeaders(leader, leaderEpoch int32) {
	h.send(&fetch.Leaders{Leaders: map[offsetstore.TopicPartition]int32{tp0: leader}, LeaderEpochs: map[offsetstore.TopicPartition]int32{tp0: leaderEpoch}})
}

// leaderEpochRecords answers a fetch entry with records [from, to) whose last
// batch has leader epoch le.
func leaderEpochRecords(to int64, le int32) func(offsets.FetchEntry) fetch.PartitionResult {
	return func(e offsets.FetchEntry) fetch.PartitionResult {
		pr := records(e, to, 0, to)
		pr.LastLeaderEpoch = le
		return pr
	}
}

// fetchingAt assigns tp0 (no committed offset, earliest) under leader 1 in
// leader epoch 5 and fetches records [0, 10) of leader epoch 5.
func fetchingAt10(t *testing.T) *coordHarness {
	t.Helper()
	h := newCoordHarness(t, coordinatorConfig{validate: true})
	h.sendLeaders(1, 5)
	h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0})
	r := h.takeResolve()
	if e := r.At(0); e.Leader != 1 || e.LeaderEpoch != 5 || e.ValidateLeaderEpoch != -1 {
		t.Fatalf("lookup entry %+v: want leader 1, leader epoch 5, no leader epoch to validate", e)
	}
	h.answerResolve(r, bounds(0, 10))
	f := h.takeFetch(1)
	if le := f.At(0).LeaderEpoch; le != 5 {
		t.Fatalf("fetch sent with leader epoch %d, want the metadata's 5", le)
	}
	h.answerFetch(f, leaderEpochRecords(10, 5))
	if p := h.c.byTP(tp0); p.pos.Offset() != 10 || p.fetchedLeaderEpoch != 5 {
		t.Fatalf("position %v, fetched leader epoch %d; want 10 and 5", p.pos, p.fetchedLeaderEpoch)
	}
	return h
}

// TestLeaderChangeValidatesPosition: after a leader change (a newer leader
// epoch in the metadata) a fetching partition asks the new leader where
// the leader epoch of its last record ends, and resumes where it was when
// the log did not diverge, in the same partition epoch (batches being
// processed still count).
func TestLeaderChangeValidatesPosition(t *testing.T) {
	h := fetchingAt10(t)
	epoch := h.c.byTP(tp0).epoch
	f := h.takeFetch(1)   // the next fetch, in flight to the old leader
	h.sendLeaders(-1, -1) // offline for a moment: no leader, no leader epoch
	h.sendLeaders(2, 6)
	if st := h.c.byTP(tp0).state; st != AwaitValidation {
		t.Fatalf("state %v after a leader change, want %v", st, AwaitValidation)
	}
	if len(h.resolves) != 0 {
		t.Fatal("a lookup was sent with a fetch of the partition in flight")
	}
	// the old leader's answer is dropped, then the position is validated
	h.answerFetch(f, leaderEpochRecords(12, 5))
	if p := h.c.byTP(tp0); p.pos.Offset() != 10 || len(h.messages) != 1 {
		t.Fatalf("the old leader's records were applied: position %v", p.pos)
	}
	r := h.takeResolve()
	if e := r.At(0); e.Leader != 2 || e.LeaderEpoch != 6 || e.ValidateLeaderEpoch != 5 || e.Request != offsetstore.Exact(10) {
		t.Fatalf("validation entry %+v: want leader 2, leader epoch 6, leader epoch 5 to validate at 10", e)
	}
	h.answerResolve(r, func(offsets.ResolveEntry) resolve.PartitionResult {
		return resolve.PartitionResult{LogStart: 0, HighWatermark: 12, TimeOffset: -1, EndLeaderEpoch: 5, LeaderEpochEndOffset: 10}
	})
	p := h.c.byTP(tp0)
	if p.state != Fetching || p.pos.Offset() != 10 || p.epoch != epoch || len(h.resets(tp0)) != 1 {
		t.Fatalf("after validation: %v at %v (partition epoch %d, was %d), resets %+v; want fetching at 10 in the same partition epoch, no new reset",
			p.state, p.pos, p.epoch, epoch, h.resets(tp0))
	}
	if le := h.takeFetch(2).At(0).LeaderEpoch; le != 6 {
		t.Fatalf("fetch to the new leader with leader epoch %d, want 6", le)
	}
}

// TestStaleLeaderEpochResultDropped: a fetch answered for a leader epoch
// the partition has moved past is dropped, even when the partition had
// nothing to validate, and fetched again with the new leader epoch.
func TestStaleLeaderEpochResultDropped(t *testing.T) {
	h := newCoordHarness(t, coordinatorConfig{validate: true})
	h.sendLeaders(1, 5)
	h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0})
	h.answerResolve(h.takeResolve(), bounds(0, 10))
	f := h.takeFetch(1)
	h.sendLeaders(1, 6) // same broker, new leader epoch: nothing fetched yet, nothing to validate
	dropped := h.c.stats.staleDropped.Load()
	h.answerFetch(f, leaderEpochRecords(10, 5))
	p := h.c.byTP(tp0)
	if p.pos.Offset() != 0 || len(h.messages) != 0 || h.c.stats.staleDropped.Load() != dropped+1 {
		t.Fatalf("a result of leader epoch 5 was applied after leader epoch 6: position %v, %d messages", p.pos, len(h.messages))
	}
	if le := h.takeFetch(1).At(0).LeaderEpoch; le != 6 {
		t.Fatalf("fetched again with leader epoch %d, want 6", le)
	}
	// an older leader epoch is taken (a recreated topic's leader epochs start over)
	h.sendLeaders(1, 0)
	if p.leaderEpoch != 0 {
		t.Fatalf("leader epoch %d after metadata of leader epoch 0, want 0", p.leaderEpoch)
	}
}

// TestLogTruncationReset: when the new leader's log holds the leader epoch of the
// last record read only up to an offset below the position (an unclean
// election truncated it), the partition resumes there, the reset is
// reported as log_truncation with data loss, and the commit goes back to
// it once the records from there are processed again.
func TestLogTruncationReset(t *testing.T) {
	h := fetchingAt10(t)
	h.completeAll()
	h.send(&flushEvent{done: make(chan error, 1)})
	cj := h.commits[0]
	h.commits = nil
	if e := cj.Request.At(0); e.Offset != 10 || e.LeaderEpoch != 5 {
		t.Fatalf("commit entry %+v: want offset 10 with leader epoch 5", e)
	}
	h.send(&commit.Result{Request: cj.Request})
	f := h.takeFetch(1)
	h.sendLeaders(2, 6)
	h.answerFetch(f, leaderEpochRecords(12, 5))
	h.answerResolve(h.takeResolve(), func(offsets.ResolveEntry) resolve.PartitionResult {
		return resolve.PartitionResult{LogStart: 0, HighWatermark: 12, TimeOffset: -1, EndLeaderEpoch: 5, LeaderEpochEndOffset: 7}
	})
	rs := h.resets(tp0)
	if len(rs) != 2 {
		t.Fatalf("resets %+v: want the start and a log truncation", rs)
	}
	ev := rs[1]
	if ev.Reason != offsetstore.ReasonLogTruncation || !ev.DataLoss || ev.From != 10 || ev.To != 7 || ev.Skipped != 0 ||
		ev.Reason.String() != "log_truncation" {
		t.Fatalf("reset %+v: want log_truncation from 10 to 7, data loss, nothing skipped", ev)
	}
	if n := h.c.stats.resets.Load(); n != 1 {
		t.Fatalf("%d resets counted, want 1", n)
	}
	p := h.c.byTP(tp0)
	if p.state != Fetching || p.pos.Offset() != 7 || p.fetchedLeaderEpoch != 5 {
		t.Fatalf("%v at %v, fetched leader epoch %d: want fetching at 7, leader epoch 5 below it", p.state, p.pos, p.fetchedLeaderEpoch)
	}
	// the new leader's records 7..11 (leader epoch 6) are processed and committed
	h.answerFetch(h.takeFetch(2), leaderEpochRecords(12, 6))
	h.completeAll()
	h.send(&flushEvent{done: make(chan error, 1)})
	if e := h.commits[0].Request.At(0); e.Offset != 12 || e.LeaderEpoch != 6 {
		t.Fatalf("commit entry %+v: want offset 12 with leader epoch 6", e)
	}
}

// TestCommittedLeaderEpochValidated: a committed offset that carries the leader
// epoch of its record is checked with the leader before fetching; a
// divergence below it is a log_truncation reset.
func TestCommittedLeaderEpochValidated(t *testing.T) {
	for _, tt := range []struct {
		name     string
		validate bool
		endAt    int64 // where the leader epoch ends
		want     int64 // where fetching starts
		reset    bool
	}{
		{name: "same log", validate: true, endAt: 30, want: 20},
		{name: "diverged", validate: true, endAt: 15, want: 15, reset: true},
		{name: "validation off", validate: false, want: 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newCoordHarness(t, coordinatorConfig{validate: tt.validate})
			h.sendLeaders(1, 9)
			h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.CommittedAt(20, 3)})
			if tt.validate {
				r := h.takeResolve()
				if e := r.At(0); e.ValidateLeaderEpoch != 3 || e.LeaderEpoch != 9 {
					t.Fatalf("entry %+v: want leader epoch 3 validated under leader epoch 9", e)
				}
				h.answerResolve(r, func(offsets.ResolveEntry) resolve.PartitionResult {
					return resolve.PartitionResult{LogStart: 0, HighWatermark: 40, TimeOffset: -1, EndLeaderEpoch: 3, LeaderEpochEndOffset: tt.endAt}
				})
			}
			if p := h.c.byTP(tp0); p.state != Fetching || p.pos.Offset() != tt.want {
				t.Fatalf("%v at %v, want fetching at %d", p.state, p.pos, tt.want)
			}
			if rs := h.resets(tp0); (len(rs) == 1) != tt.reset || (tt.reset && (rs[0].Reason != offsetstore.ReasonLogTruncation || !rs[0].DataLoss)) {
				t.Fatalf("resets %+v, want a log truncation: %v", rs, tt.reset)
			}
		})
	}
}

// TestOutOfRangeValidatesLeaderEpoch: an OffsetOutOfRange answer (a truncated
// log ends below the position) is checked with the leader epoch of the last
// record too, so the partition resumes at the divergence point instead
// of where auto_offset_reset would put it.
func TestOutOfRangeValidatesLeaderEpoch(t *testing.T) {
	h := fetchingAt10(t)
	h.answerFetch(h.takeFetch(1), outOfRange(0, 8))
	r := h.takeResolve()
	if e := r.At(0); e.ValidateLeaderEpoch != 5 || e.Request != offsetstore.Exact(10) {
		t.Fatalf("entry %+v: want leader epoch 5 validated at 10", e)
	}
	h.answerResolve(r, func(offsets.ResolveEntry) resolve.PartitionResult {
		return resolve.PartitionResult{LogStart: 0, HighWatermark: 8, TimeOffset: -1, EndLeaderEpoch: 5, LeaderEpochEndOffset: 8}
	})
	rs := h.resets(tp0)
	if ev := rs[len(rs)-1]; ev.Reason != offsetstore.ReasonLogTruncation || ev.To != 8 {
		t.Fatalf("reset %+v, want log_truncation to 8", ev)
	}
}

// TestValidLeaderEpochBeatsLaggingHighWatermark: right after an election the new
// leader's high watermark may lag the old one's; a position the leader's
// log holds in the last record's leader epoch is valid, not data loss.
func TestValidLeaderEpochBeatsLaggingHighWatermark(t *testing.T) {
	h := fetchingAt10(t)
	f := h.takeFetch(1)
	h.sendLeaders(2, 6)
	h.answerFetch(f, leaderEpochRecords(12, 5))
	h.answerResolve(h.takeResolve(), func(offsets.ResolveEntry) resolve.PartitionResult {
		return resolve.PartitionResult{LogStart: 0, HighWatermark: 8, TimeOffset: -1, EndLeaderEpoch: 5, LeaderEpochEndOffset: 10}
	})
	if p := h.c.byTP(tp0); p.state != Fetching || p.pos.Offset() != 10 || len(h.resets(tp0)) != 1 {
		t.Fatalf("%v at %v, resets %+v: want fetching at 10, no reset", p.state, p.pos, h.resets(tp0))
	}
}

// TestFirstLeaderEpochValidatesPosition: a partition assigned while it had
// no leader (so no leader epoch known) validates its committed offset as
// best it can; when the metadata then gives it a leader whose leader epoch is
// newer than that of the record below its position, leaders changed since
// that record was written, maybe uncleanly: the position is validated
// with the new leader before anything is fetched. Found by the state
// machine: a topic recreated (or an unclean election) while the partition
// was offline, and the records of the new log handed out after a committed
// offset of the old one with no reset.
func TestFirstLeaderEpochValidatesPosition(t *testing.T) {
	for _, tt := range []struct {
		name        string
		leaderEpoch int32 // the leader epoch the metadata gives at last
		validate    bool  // the position is checked again
	}{
		{name: "newer leader epoch", leaderEpoch: 4, validate: true},
		{name: "leader epoch of the record", leaderEpoch: 3, validate: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newCoordHarness(t, coordinatorConfig{validate: true})
			h.sendLeaders(-1, -1) // offline: no leader, no leader epoch
			h.assign(1, newMemoryStore(1), assignedPartition{tp: tp0, start: offsetstore.CommittedAt(20, 3)})
			r := h.takeResolve()
			if e := r.At(0); e.LeaderEpoch != -1 || e.ValidateLeaderEpoch != 3 {
				t.Fatalf("entry %+v: want leader epoch 3 validated, no leader epoch known", e)
			}
			h.answerResolve(r, func(offsets.ResolveEntry) resolve.PartitionResult {
				return resolve.PartitionResult{LogStart: 0, HighWatermark: 40, TimeOffset: -1, EndLeaderEpoch: 3, LeaderEpochEndOffset: 30}
			})
			if p := h.c.byTP(tp0); p.state != Fetching || p.pos.Offset() != 20 {
				t.Fatalf("%v at %v, want fetching at 20 (waiting for a leader)", p.state, p.pos)
			}
			h.sendLeaders(1, tt.leaderEpoch)
			if !tt.validate {
				if p := h.c.byTP(tp0); p.state != Fetching || h.takeFetch(1).At(0).Position.Offset() != 20 {
					t.Fatalf("%v: want a fetch at 20", p.state)
				}
				return
			}
			if p := h.c.byTP(tp0); p.state != AwaitValidation || len(h.fetches) != 0 {
				t.Fatalf("%v with %d fetches after the first leader epoch %d (record's leader epoch 3): want %v, no fetch",
					p.state, len(h.fetches), tt.leaderEpoch, AwaitValidation)
			}
			r = h.takeResolve()
			if e := r.At(0); e.LeaderEpoch != tt.leaderEpoch || e.ValidateLeaderEpoch != 3 || e.Request != offsetstore.Exact(20) {
				t.Fatalf("entry %+v: want leader epoch 3 validated at 20 under leader epoch %d", e, tt.leaderEpoch)
			}
			// the new leader's log holds leader epoch 3 only up to 15
			h.answerResolve(r, func(offsets.ResolveEntry) resolve.PartitionResult {
				return resolve.PartitionResult{LogStart: 0, HighWatermark: 18, TimeOffset: -1, EndLeaderEpoch: 3, LeaderEpochEndOffset: 15}
			})
			rs := h.resets(tp0)
			if len(rs) != 1 || rs[0].Reason != offsetstore.ReasonLogTruncation || !rs[0].DataLoss || rs[0].To != 15 {
				t.Fatalf("resets %+v: want one log_truncation to 15", rs)
			}
		})
	}
}
