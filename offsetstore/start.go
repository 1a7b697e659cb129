package offsetstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StartKind says what a [StartRequest] asks for.
type StartKind uint8

const (
	// StartByPolicy asks for the reset policy of the consumer
	// (auto_offset_reset). It is the zero StartKind, so the zero
	// StartRequest means "start where the policy says".
	StartByPolicy StartKind = iota
	// StartEarliest asks for the log start offset.
	StartEarliest
	// StartLatest asks for the high watermark: only records produced
	// from now on.
	StartLatest
	// StartAtTime asks for the first offset whose timestamp is at or
	// after a time.
	StartAtTime
	// StartExact asks for one exact offset, as given by a user seek.
	StartExact
	// StartCommitted asks to resume at a committed offset, after
	// checking it against the log bounds.
	StartCommitted
)

var startKindNames = [...]string{
	StartByPolicy:  "policy",
	StartEarliest:  "earliest",
	StartLatest:    "latest",
	StartAtTime:    "at_time",
	StartExact:     "exact",
	StartCommitted: "committed",
}

// String returns the kind's lower-case name.
func (k StartKind) String() string {
	if int(k) < len(startKindNames) {
		return startKindNames[k]
	}
	return "StartKind(" + strconv.Itoa(int(k)) + ")"
}

// StartRequest is where a partition wants to start: a logical position
// that the resolve step turns into an absolute one (an offset, the
// engine's position). It is a value type; the zero value is "start where
// the reset policy says".
//
// A StartRequest is never an offset: code that needs one must wait for the
// coordinator to resolve the request into a position.
type StartRequest struct {
	kind   StartKind
	offset int64 // StartExact, StartCommitted: the offset; StartAtTime: Unix milliseconds
	// leaderEpoch is StartCommitted's leader epoch (Kafka's, not an
	// [Epoch]) plus one (0: none), so the zero value carries no leader
	// epoch.
	leaderEpoch int32
}

// ByPolicy returns the request to start where the consumer's reset policy
// says (auto_offset_reset).
func ByPolicy() StartRequest { return StartRequest{kind: StartByPolicy} }

// Earliest returns the request to start at the log start offset.
func Earliest() StartRequest { return StartRequest{kind: StartEarliest} }

// Latest returns the request to start at the high watermark.
func Latest() StartRequest { return StartRequest{kind: StartLatest} }

// AtTime returns the request to start at the first record whose timestamp
// is at or after t (millisecond precision). If no such record exists the
// partition starts at the high watermark.
func AtTime(t time.Time) StartRequest {
	return StartRequest{kind: StartAtTime, offset: t.UnixMilli()}
}

// Exact returns the request to start at offset. A negative offset is
// rejected by the coordinator with [ErrNegativeOffset]. An offset outside
// the log is handled like any out-of-range position: below the log start
// the partition resumes at the log start, above the high watermark the
// reset policy applies.
func Exact(offset int64) StartRequest { return StartRequest{kind: StartExact, offset: offset} }

// Committed returns the request to resume at a committed offset. The
// coordinator validates it against the log bounds before fetching (when
// validation is enabled) and falls back as for [Exact].
func Committed(offset int64) StartRequest {
	return StartRequest{kind: StartCommitted, offset: offset}
}

// CommittedAt returns the request to resume at a committed offset that
// was committed with the leader epoch of the record before it
// (OffsetCommit v7+, KIP-320). Before fetching, the coordinator asks the
// partition's leader where that leader epoch ends (when validation is
// enabled): if its log diverged below offset, the partition resumes at
// the divergence point and the reset is reported as
// [ReasonLogTruncation]. A negative leaderEpoch is [Committed].
func CommittedAt(offset int64, leaderEpoch int32) StartRequest {
	r := Committed(offset)
	if leaderEpoch >= 0 {
		r.leaderEpoch = leaderEpoch + 1
	}
	return r
}

// LeaderEpoch returns the leader epoch a [CommittedAt] request carries;
// ok is false for every other request.
func (r StartRequest) LeaderEpoch() (leaderEpoch int32, ok bool) {
	if r.kind == StartCommitted && r.leaderEpoch > 0 {
		return r.leaderEpoch - 1, true
	}
	return -1, false
}

// Kind says what the request asks for.
func (r StartRequest) Kind() StartKind { return r.kind }

// Offset returns the offset of an Exact or Committed request; ok is false
// for the other kinds.
func (r StartRequest) Offset() (offset int64, ok bool) {
	if r.kind == StartExact || r.kind == StartCommitted {
		return r.offset, true
	}
	return 0, false
}

// Time returns the time of an AtTime request; ok is false for the other
// kinds.
func (r StartRequest) Time() (t time.Time, ok bool) {
	if r.kind == StartAtTime {
		return time.UnixMilli(r.offset), true
	}
	return time.Time{}, false
}

// String formats the request for logs, for example "committed(10)".
func (r StartRequest) String() string {
	switch r.kind {
	case StartExact, StartCommitted:
		return r.kind.String() + "(" + strconv.FormatInt(r.offset, 10) + ")"
	case StartAtTime:
		return r.kind.String() + "(" + time.UnixMilli(r.offset).UTC().Format(time.RFC3339Nano) + ")"
	}
	return r.kind.String()
}

// ResetPolicy is auto_offset_reset: where a partition starts when it has no
// valid committed offset. The zero value is ResetEarliest.
type ResetPolicy uint8

const (
	// ResetEarliest starts at the log start offset: nothing is skipped.
	ResetEarliest ResetPolicy = iota
	// ResetLatest starts at the high watermark: only new records.
	ResetLatest
	// ResetNone stops the partition with a *[ResetError] instead of
	// choosing a position.
	ResetNone
)

// String returns the name used in configuration files.
func (p ResetPolicy) String() string {
	switch p {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	case ResetNone:
		return "none"
	}
	return "ResetPolicy(" + strconv.Itoa(int(p)) + ")"
}

// parseResetPolicy parses "earliest", "latest" or "none" (case-insensitive;
// the empty string is earliest).
func parseResetPolicy(s string) (ResetPolicy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "earliest", "smallest", "beginning":
		return ResetEarliest, nil
	case "latest", "largest", "end":
		return ResetLatest, nil
	case "none", "error":
		return ResetNone, nil
	}
	return 0, fmt.Errorf("auto_offset_reset %q is not one of earliest, latest, none", s)
}

// MarshalText implements encoding.TextMarshaler.
func (p ResetPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler, so a ResetPolicy can
// be read from YAML or JSON as "earliest", "latest" or "none".
func (p *ResetPolicy) UnmarshalText(b []byte) error {
	v, err := parseResetPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Request returns the StartRequest the policy stands for: Earliest or
// Latest. ok is false for ResetNone, which has no position to start at.
func (p ResetPolicy) Request() (req StartRequest, ok bool) {
	switch p {
	case ResetLatest:
		return Latest(), true
	case ResetNone:
		return StartRequest{}, false
	}
	return Earliest(), true
}
