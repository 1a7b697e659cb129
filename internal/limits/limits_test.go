package limits_test

import (
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/limits"
)

// TestTopicName: Kafka's rule for topic names.
func TestTopicName(t *testing.T) {
	for _, c := range []struct {
		name string
		err  string // in the error; "" if valid
	}{
		{"orders", ""}, {"orders.v2_eu-west", ""}, {strings.Repeat("a", 249), ""}, {"...", ""},
		{"", "empty topic name"}, {".", `"." is not a valid topic name`}, {"..", `".." is not a valid topic name`},
		{strings.Repeat("a", 250), "of 250 characters; Kafka allows at most 249"},
		{"my orders", `found ' '`}, {"orders/dlq", `found '/'`}, {"ördersé", `found 'ö'`}, {"a\nb", `found '\n'`},
	} {
		err := limits.TopicName(c.name)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: %v, want %q", c.name, err, c.err)
		}
	}
}
