package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencepost-dev/fencepost/internal/wait"

	"github.com/fencepost-dev/fencepost/stages"
)

// Chunk is what one read of a changelog partition returned.
type Chunk struct {
	// Records are the committed records read (aborted transactions are
	// never here), in offset order.
	Records []stages.Record
	// Next is the offset to read from next: past the records and past
	// any transaction markers the read skipped.
	Next int64
	// End is how far the committed records can be read: the
	// partition's last stable offset (records above it belong to a
	// transaction still open, which may abort).
	End int64
	// HighWatermark is the partition's high watermark; 0 when the
	// reader does not know it (then a restore ends at End).
	HighWatermark int64
	// LogStart is the partition's first offset.
	LogStart int64
}

// Reader reads a changelog partition, read_committed.
type Reader interface {
	// Read returns the records of topic's partition from offset on (a
	// bounded amount of them). ErrOutOfRange when offset is not in the
	// log; with it, Chunk.LogStart and End when known.
	Read(ctx context.Context, topic string, partition int32, offset int64) (Chunk, error)
}

// ErrOutOfRange is a Reader's answer for an offset outside the log.
var ErrOutOfRange = errors.New("offset out of range")

// Restored says what a restore did, for the log and the metrics.
type Restored struct {
	From, To       int64
	Records, Bytes int64
	// Wiped: the checkpoint was outside the changelog (deleted or
	// recreated, or truncated), so the local store was emptied first.
	Wiped bool
	// Waited is how long the restore waited for transactions open on
	// the changelog to end (see Restore).
	Waited time.Duration
}

// Restore brings p up to the changelog's last stable offset, from its
// checkpoint: each read is applied to pebble in one atomic write with the
// new checkpoint, so a crash during a restore resumes where it stopped.
// progress, if not nil, is called after each applied read. A checkpoint
// outside the log (the changelog was recreated or truncated) empties the
// store and restores from the log's start: the changelog is the truth.
//
// With settle, it restores every record committed below the high
// watermark it finds at its start, waiting while a transaction open
// there holds the last stable offset back: read_committed readers see
// nothing past the first open transaction, and committed changes can
// follow one. An owner killed in a transaction leaves it open until the
// broker aborts it (transaction_timeout), while the partition's next
// owner commits changes after it; a restore that stopped at the last
// stable offset would miss those. Settle a store's changelog when this
// member is its only writer (nothing of its own is in an open
// transaction); a table's topic is not settled (its writers are the
// application's, and a table only catches up).
func Restore(ctx context.Context, st *Storage, p *Partition, r Reader, settle bool, progress func(Restored, int64)) (*Partition, Restored, error) {
	res := Restored{From: p.Next(), To: p.Next()}
	pos := p.Next()
	target := int64(-1) // the high watermark at the start (settle)
	var waitFrom time.Time
	backoff := 10 * time.Millisecond
	// A full gathering is applied on a goroutine of its own while the
	// next one is read (one at a time, in order: each apply moves the
	// checkpoint past the one before); b gathers, spare is the other.
	b, spare := &bulk{}, &bulk{}
	var inflight applying
	defer func() { _ = inflight.wait() }() // nothing outlives the restore
	applied := pos                         // the checkpoint of the last apply started
	// flush applies what was gathered, up to pos, once the apply in
	// flight ended
	flush := func() error {
		if err := inflight.wait(); err != nil {
			return err
		}
		if len(b.ents) == 0 && pos == applied {
			return nil
		}
		if err := p.applyBulk(ctx, b, pos); err != nil {
			return err
		}
		applied = pos
		return nil
	}
	for {
		c, err := r.Read(ctx, p.id.Changelog, p.id.Partition, pos)
		if errors.Is(err, ErrOutOfRange) && !res.Wiped {
			// the store is ahead of or behind the log: rebuild it
			_ = inflight.wait()
			b.reset()
			id := p.id
			if err := st.Wipe(p); err != nil {
				return nil, res, fmt.Errorf("state store %s, partition %d: removing the local store whose checkpoint %d is outside the changelog: %w", id.Store, id.Partition, pos, err)
			}
			if p, _, err = st.Open(id); err != nil {
				return nil, res, err
			}
			res.Wiped, pos = true, max(c.LogStart, 0)
			applied = pos
			res.From, res.To = pos, pos
			continue
		}
		if err != nil {
			// what was read is good: keep it
			if ferr := flush(); ferr != nil {
				return p, res, ferr
			}
			return p, res, fmt.Errorf("state store %s, partition %d: restoring from %s at offset %d: %w",
				p.id.Store, p.id.Partition, p.id.Changelog, pos, err)
		}
		if len(c.Records) > 0 || c.Next > pos {
			b.add(c.Records)
			for i := range c.Records {
				res.Bytes += int64(len(c.Records[i].Key) + len(c.Records[i].Value))
			}
			res.Records += int64(len(c.Records))
			pos, res.To = c.Next, c.Next
			if b.size() >= bulkBytes {
				if err := inflight.wait(); err != nil {
					return p, res, err
				}
				inflight.start(ctx, p, b, pos)
				applied = pos
				b, spare = spare, b // spare was emptied by its apply
			}
			if progress != nil {
				progress(res, c.End)
			}
		}
		if target < 0 {
			target = c.HighWatermark
		}
		if pos < c.End {
			if err := ctx.Err(); err != nil {
				_ = flush()
				return p, res, err
			}
			continue
		}
		if err := flush(); err != nil {
			return p, res, err
		}
		// at the last stable offset: done, unless a transaction that
		// was open below the target still is
		if !settle || c.End >= target || c.End >= c.HighWatermark {
			if !waitFrom.IsZero() {
				res.Waited = time.Since(waitFrom)
			}
			return p, res, nil
		}
		if waitFrom.IsZero() {
			waitFrom = time.Now()
		}
		if progress != nil {
			progress(res, target)
		}
		if !wait.For(ctx, backoff) {
			return p, res, ctx.Err()
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// applying is the apply of a gathering in flight, if any.
type applying struct {
	done chan error
}

// start applies b up to next on a goroutine of its own. The previous
// apply must have ended (wait).
func (a *applying) start(ctx context.Context, p *Partition, b *bulk, next int64) {
	a.done = make(chan error, 1)
	go func() { a.done <- p.applyBulk(ctx, b, next) }()
}

// wait waits for the apply in flight to end and returns its error; nil
// when none is in flight.
func (a *applying) wait() error {
	if a.done == nil {
		return nil
	}
	err := <-a.done
	a.done = nil
	return err
}
