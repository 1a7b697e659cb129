package run

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the stages of builtinConfig
)

const builtinConfig = `kafka:
  embedded:
    partitions: 2
    topics: [purchases]
    demo_producer: {topic: events, rate: 400, malformed_every: 10}
consumer:
  group: output
  topics: [events]
  commit_interval: 200ms
pipeline:
  - stage: json
    require: [type, user]
  - stage: filter
    if: json.type == "purchase"
  - stage: produce
    topic: purchases
dead_letter:
  topic: events.dlq
  retries: -1
shutdown_timeout: 10s
`

var outputRE = regexp.MustCompile(`summary: processed (\d+) records .*; filtered (\d+); produced (\d+); dead letters (\d+); resets (\d+);`)

// TestRunOutputAccountsForEveryRecord runs the built-in stages on the
// demo events (one in ten broken): every processed record is filtered,
// produced or dead-lettered, and the progress line, the summary and
// /metrics say how many of each; the first start of the group is not
// counted as a reset; the dead-letter warnings are rate-limited, and what
// they leave out is counted in the log.
func TestRunOutputAccountsForEveryRecord(t *testing.T) {
	cfg := writeFile(t, t.TempDir(), "c.yaml", builtinConfig)
	base, errOut, done, cancel := startRun(t, cfg, "200ms", stages.Default)
	var body string
	waitUntil(t, 30*time.Second, "300 records processed", func() bool {
		_, body = get(t, base+"/metrics")
		return metricValue(body, "fencepost_processed_records_total") >= 300
	})
	for _, name := range []string{
		`fencepost_stage_dropped_records_total{stage="filter"}`, `fencepost_stage_dead_lettered_records_total{stage="json"}`,
		`fencepost_stage_failed_records_total{stage="json"}`, `fencepost_stage_output_records_total{stage="produce"}`,
		`fencepost_produced_records_total{topic="purchases"}`, `fencepost_produced_records_total{topic="events.dlq"}`,
		`fencepost_produced_bytes_total{topic="purchases"}`, `fencepost_produce_latency_seconds_count{topic="purchases"}`,
		`fencepost_fetch_records_total{broker="0"}`, `fencepost_fetch_bytes_total{broker="0"}`,
	} {
		if v := metricValue(body, name); v <= 0 {
			t.Errorf("%s is %v, want > 0", name, v)
		}
	}
	progress := regexp.MustCompile(`\] processed \d+ \([\d.]+/s\) \| lag \d+ \| partitions 2 \(stopped 0\) \| filtered [1-9]\d* \| produced [1-9]\d* \| dead letters [1-9]\d* \| resets 0 \| buffered `)
	waitUntil(t, 20*time.Second, "a progress line with records filtered, produced and dead-lettered", func() bool {
		return progress.MatchString(errOut.String())
	})
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	out := errOut.String()
	m := outputRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary:\n%s", out)
	}
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	processed, filtered, produced, dead, resets := n[1], n[2], n[3], n[4], n[5]
	if filtered+produced+dead != processed || filtered == 0 || produced == 0 || dead == 0 || resets != 0 {
		t.Errorf("processed %d = filtered %d + produced %d + dead letters %d? resets %d (want 0)", processed, filtered, produced, dead, resets)
	}
	if c := strings.Count(out, "starting at the earliest offset (no committed offset)"); c != 2 || strings.Contains(out, "partition reset") {
		t.Errorf("%d first-start lines, want 2 and no reset:\n%s", c, out)
	}
	// each dead letter logs one warning: written, or counted in the
	// "suppressed" of a later one
	const warning = "record failed; sending its source record to the dead-letter sink"
	suppressedRE := regexp.MustCompile(`"suppressed": (\d+)`)
	written, accounted := 0, 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, warning) {
			continue
		}
		if !strings.Contains(l, `"offset"`) { // the flush: a count only
			accounted--
		} else {
			written++
		}
		accounted++
		if s := suppressedRE.FindStringSubmatch(l); s != nil {
			v, _ := strconv.Atoi(s[1])
			accounted += v
		}
	}
	if accounted != dead || written > 10 || written == dead {
		t.Errorf("%d dead letters; %d warnings written, %d accounted for with the suppressed counts:\n%s", dead, written, accounted, out)
	}
}
