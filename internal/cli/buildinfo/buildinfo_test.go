package buildinfo

import (
	"runtime/debug"
	"testing"
)

// TestBuildVersion: the version line shows the module version and what
// Go recorded of the checkout; a version set at link time wins, and a
// custom binary reports the fencepost module it was built with.
func TestBuildVersion(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string // link-time values
		want            string
	}{
		{"no build information", nil, "", "", "(devel)"},
		{"a checkout", &debug.BuildInfo{Main: debug.Module{Path: "github.com/fencepost-dev/fencepost", Version: "v0.0.0-20260102030405-0123abcd+dirty"}, Settings: vcs},
			"", "", "v0.0.0-20260102030405-0123abcd+dirty (commit 0123abcd, 2026-01-02T03:04:05Z, modified)"},
		{"go run: nothing recorded", &debug.BuildInfo{Main: debug.Module{Path: "github.com/fencepost-dev/fencepost", Version: "(devel)"}}, "", "", "(devel)"},
		{"a custom binary", &debug.BuildInfo{Main: debug.Module{Path: "example.com/mine", Version: "v0.3.0"},
			Deps: []*debug.Module{{Path: "github.com/fencepost-dev/fencepost", Version: "v1.4.0"}}}, "", "", "v1.4.0"},
		{"set at link time", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v2.0.0", "feedbeef", "v2.0.0 (commit feedbeef)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildFrom(tt.bi, tt.bi != nil, tt.version, tt.commit).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
