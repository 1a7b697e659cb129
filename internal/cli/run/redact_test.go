package run

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/logging/redacttest"
	"github.com/fencepost-dev/fencepost/stages"
)

// TestRunRedactsSecret: a run that uses a secret where its logs show it
// (the group, an expression) hides it there, in both formats.
func TestRunRedactsSecret(t *testing.T) {
	const secret = `s3cret-h0st`
	t.Setenv("KAFKA_PASSWORD", secret)
	for _, format := range []string{"console", "json"} {
		t.Run(format, func(t *testing.T) {
			src := fmt.Sprintf("kafka: {embedded: {topics: [orders]}}\n"+
				"consumer: {group: \"${KAFKA_PASSWORD}\", topics: [orders]}\nhttp: {address: off}\n"+
				"log: {level: debug, format: %s}\npipeline:\n  - {stage: filter, if: 'string(value) != \"${KAFKA_PASSWORD}\"'}\n", format)
			file := writeFile(t, t.TempDir(), "run.yaml", src)
			code, out, errOut := runCLI(context.Background(), stages.Default, "run", "-c", file, "--for", "1s", "--progress", "0")
			if code != ExitOK {
				t.Fatalf("exit %d:\n%s%s", code, out, errOut)
			}
			all := strings.ReplaceAll(out+errOut, file, "FILE")
			if !strings.Contains(all, "[redacted]") {
				t.Errorf("nothing redacted: the secret did not reach the output, the test shows nothing:\n%s", all)
			}
			for _, line := range strings.Split(all, "\n") {
				leak := redacttest.ConsoleLeak(line, secret)
				if format == "json" && strings.HasPrefix(line, "{") {
					leak = redacttest.JSONLeak(line, secret)
				}
				if leak != "" {
					t.Errorf("%q shows %q", line, leak)
				}
			}
		})
	}
}
