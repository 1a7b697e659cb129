package app

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// monitor samples a running pipeline: every interval it computes the
// consumer lag (high watermarks against the processed watermark of each
// assigned partition) and prints a progress line; with a record limit it
// checks the processed count every 200ms and calls onLimit once the
// limit is reached.
type monitor struct {
	p        *pipeline.Pipeline
	adm      *kadm.Client
	topics   []string
	interval time.Duration // lag and progress; progress is printed if print
	print    bool
	out      io.Writer   // progress lines (console)
	log      *zap.Logger // progress entries (json logging), if set
	limit    int64
	onLimit  func()

	mu   sync.Mutex
	lag  map[offsetstore.TopicPartition]int64
	last struct {
		at        time.Time
		processed int64
	}
}

// run samples until ctx ends.
func (m *monitor) run(ctx context.Context) {
	start := time.Now()
	m.last.at = start
	report := time.NewTicker(m.interval)
	defer report.Stop()
	var limitC <-chan time.Time
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
		case now := <-report.C:
			m.sample(ctx, now, now.Sub(start))
		}
	}
}

// sample refreshes the lag and prints progress.
func (m *monitor) sample(ctx context.Context, now time.Time, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, min(m.interval, 3*time.Second))
	defer cancel()
	s, err := m.p.Stats(ctx)
	if err != nil {
		return
	}
	lag, lagErr := m.refreshLag(ctx, s)
	rate := float64(s.RecordsProcessed-m.last.processed) / now.Sub(m.last.at).Seconds()
	m.last.at, m.last.processed = now, s.RecordsProcessed
	if !m.print {
		return
	}
	lagText := fmt.Sprint(lag)
	if lagErr != nil {
		lagText = "?"
	}
	if m.log != nil {
		m.log.Info("progress", zap.Int64("processed", s.RecordsProcessed), zap.Float64("records_per_second", rate),
			zap.String("lag", lagText), zap.Int("partitions", len(s.Partitions)), zap.Int64("stopped_partitions", s.StoppedPartitions),
			zap.Int64("resets", s.Resets), zap.Int64("dead_letters", s.DeadLetters), zap.Int64("buffered_bytes", s.BufferedBytes))
		return
	}
	fmt.Fprintf(m.out, "[%6s] processed %d (%.1f/s) | lag %s | partitions %d (stopped %d) | resets %d | dead letters %d | buffered %s\n",
		elapsed.Truncate(time.Second), s.RecordsProcessed, rate, lagText, len(s.Partitions), s.StoppedPartitions, s.Resets, s.DeadLetters,
		humanBytes(s.BufferedBytes))
}

// refreshLag computes the lag of the assigned partitions and keeps it
// for /metrics.
func (m *monitor) refreshLag(ctx context.Context, s pipeline.Stats) (int64, error) {
	ends, err := m.adm.ListEndOffsets(ctx, m.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, err
	}
	lag := map[offsetstore.TopicPartition]int64{}
	var total int64
	for _, ps := range s.Partitions {
		end, ok := ends.Lookup(ps.Partition.Topic, ps.Partition.Partition)
		if !ok || ps.Committable < 0 {
			continue
		}
		l := max(end.Offset-ps.Committable, 0)
		lag[ps.Partition] = l
		total += l
	}
	m.mu.Lock()
	m.lag = lag
	m.mu.Unlock()
	return total, nil
}

// lags returns the last lag computed, by partition.
func (m *monitor) lags() map[offsetstore.TopicPartition]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lag
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
