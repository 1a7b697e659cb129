package main

import (
	"testing"

	"github.com/fencepost-dev/fencepost/cmd/processor/app"
)

// TestConfigLints: the example configuration names the example's stage
// and lints with this binary's stages.
func TestConfigLints(t *testing.T) {
	if code := app.Main([]string{"lint", "-c", "redact.yaml"}); code != app.ExitOK {
		t.Fatalf("processor lint -c redact.yaml: exit %d", code)
	}
}
