package run

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/pipeline"
)

// monitor samples a running pipeline: every interval it prints a
// progress line (records/s, lag, what was filtered, produced and
// dead-lettered, stopped partitions); with a record limit it checks the
// processed count every 200ms and calls onLimit once the limit is
// reached.
type monitor struct {
	p        *pipeline.Pipeline
	lag      *lagSampler
	metrics  *metrics
	interval time.Duration // progress is printed this often; 0: never
	out      io.Writer     // progress lines (console)
	log      *zap.Logger   // progress entries (json logging), if set
	limit    int64
	onLimit  func()

	last struct {
		at        time.Time
		processed int64
	}
}

// run samples until ctx ends.
func (m *monitor) run(ctx context.Context) {
	start := time.Now()
	m.last.at = start
	var reportC, limitC <-chan time.Time
	if m.interval > 0 {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		reportC = t.C
	}
	if m.limit > 0 {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		limitC = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-limitC:
			if s, err := m.p.Stats(ctx); err == nil && s.RecordsProcessed >= m.limit {
				m.onLimit()
				limitC = nil
			}
		case now := <-reportC:
			m.progress(ctx, now, now.Sub(start))
		}
	}
}

// progress prints one progress line.
func (m *monitor) progress(ctx context.Context, now time.Time, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, min(m.interval, 3*time.Second))
	defer cancel()
	s, err := m.p.Stats(ctx)
	if err != nil {
		return
	}
	lags, lagErr := m.lag.lags(ctx, s)
	rate := float64(s.RecordsProcessed-m.last.processed) / now.Sub(m.last.at).Seconds()
	m.last.at, m.last.processed = now, s.RecordsProcessed
	lagText := fmt.Sprint(total(lags))
	if lagErr != nil {
		lagText = "?"
	}
	filtered, produced := m.metrics.filtered.Load(), m.metrics.producedTotal.Load()
	if m.log != nil {
		m.log.Info("progress", zap.Int64("processed", s.RecordsProcessed), zap.Float64("records_per_second", rate),
			zap.String("lag", lagText), zap.Int("partitions", len(s.Partitions)), zap.Int64("stopped_partitions", s.StoppedPartitions),
			zap.Int64("filtered", filtered), zap.Int64("produced", produced), zap.Int64("dead_letters", s.DeadLetters),
			zap.Int64("resets", s.Resets), zap.Int64("buffered_bytes", s.BufferedBytes),
			zap.Int64("restoring_partitions", s.State.Restoring), zap.Int64("restore_left", s.State.RestoreLeft))
		return
	}
	restoring := ""
	if s.State.Restoring > 0 {
		restoring = fmt.Sprintf(" | restoring %d store partition(s), %d records left", s.State.Restoring, s.State.RestoreLeft)
	}
	fmt.Fprintf(m.out, "[%6s] processed %d (%.1f/s) | lag %s | partitions %d (stopped %d) | filtered %d | produced %d | dead letters %d | resets %d | buffered %s%s\n",
		elapsed.Truncate(time.Second), s.RecordsProcessed, rate, lagText, len(s.Partitions), s.StoppedPartitions,
		filtered, produced, s.DeadLetters, s.Resets, humanBytes(s.BufferedBytes), restoring)
}

// committedLag is the group's lag by its committed offsets: what a
// restart would have to catch up on. -1 if it cannot be had.
func committedLag(ctx context.Context, adm *kadm.Client, group string, topics []string) int64 {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil || ends.Error() != nil {
		return -1
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	var total int64
	ends.Each(func(e kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At >= 0 {
			at = c.At
		}
		total += max(e.Offset-at, 0)
	})
	return total
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
