package pipebench

import (
	"testing"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/kafkaio"
)

func TestOutputDone(t *testing.T) {
	in := kafkaio.Offsets{0: 100, 1: 100}
	type O = kafkaio.Offsets
	tests := []struct {
		name                  string
		iso                   kafkaio.Isolation
		committed             O
		outEnd, outStable     O
		want                  int64
		wantVisible, wantDone bool
	}{
		{"at-least-once: nothing yet", kafkaio.ReadUncommitted, nil, O{0: 0, 1: 0}, nil, 50, false, false},
		{"at-least-once: outputs written, input not all committed", kafkaio.ReadUncommitted, O{0: 100, 1: 90}, O{0: 25, 1: 25}, nil, 50, true, false},
		{"at-least-once: input committed, outputs short", kafkaio.ReadUncommitted, O{0: 100, 1: 100}, O{0: 25, 1: 24}, nil, 50, true, false},
		{"at-least-once: done", kafkaio.ReadUncommitted, O{0: 100, 1: 100}, O{0: 25, 1: 25}, nil, 50, true, true},
		{"exactly-once: written but no transaction ended yet", kafkaio.ReadCommitted, nil, O{0: 10, 1: 12}, O{0: 0, 1: 0}, 50, false, false},
		{"exactly-once: a transaction committed", kafkaio.ReadCommitted, O{0: 40}, O{0: 11, 1: 12}, O{0: 11, 1: 0}, 50, true, false},
		// The offsets' commit can show before the markers of the same
		// transaction on the output (or the other way round).
		{"exactly-once: input committed, a marker not yet written", kafkaio.ReadCommitted, O{0: 100, 1: 100}, O{0: 27, 1: 26}, O{0: 27, 1: 13}, 50, true, false},
		{"exactly-once: a transaction still open on the output", kafkaio.ReadCommitted, O{0: 100, 1: 100}, O{0: 30, 1: 30}, O{0: 27, 1: 30}, 50, true, false},
		{"exactly-once: input not all committed, nothing open", kafkaio.ReadCommitted, O{0: 100, 1: 60}, O{0: 27, 1: 20}, O{0: 27, 1: 20}, 50, true, false},
		{"exactly-once: done (end offsets count the markers too)", kafkaio.ReadCommitted, O{0: 100, 1: 100}, O{0: 27, 1: 26}, O{0: 27, 1: 26}, 50, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			visible, done := outputDone(tc.iso, tc.committed, in, tc.outEnd, tc.outStable, tc.want)
			if visible != tc.wantVisible || done != tc.wantDone {
				t.Errorf("outputDone = visible %v, done %v; want %v, %v", visible, done, tc.wantVisible, tc.wantDone)
			}
		})
	}
}

func TestVariantIsolation(t *testing.T) {
	if got := (Variant{Name: "fencepost, defaults"}).Isolation(); got != kafkaio.ReadUncommitted {
		t.Errorf("at-least-once variant reads with isolation %v, want read_uncommitted", got)
	}
	if got := (Variant{Name: "fencepost, exactly-once", ExactlyOnce: true}).Isolation(); got != kafkaio.ReadCommitted {
		t.Errorf("exactly-once variant reads with isolation %v, want read_committed", got)
	}
}
