// Package buildinfo is what the processor binary knows about how it was
// built (the module version, the commit, whether the checkout was
// modified), for the version command and the fencepost_build_info
// metric. A version and commit set at link time (app.Version,
// app.Commit, passed in clibase.Env) take precedence.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
)

// Build is what the binary knows about how it was built.
type Build struct {
	version  string // module version, "(devel)" if unknown
	commit   string // VCS revision, when built from a checkout
	time     string // the revision's commit time
	modified bool   // the checkout had uncommitted changes
}

// Read returns the build information Go recorded, with version and
// commit (set at link time; empty: not set) taking precedence.
func Read(version, commit string) Build {
	bi, ok := debug.ReadBuildInfo()
	return buildFrom(bi, ok, version, commit)
}

// buildFrom reads the build information Go recorded (ok false: none),
// with version and commit taking precedence.
func buildFrom(bi *debug.BuildInfo, ok bool, version, commit string) Build {
	b := Build{version: version, commit: commit}
	if !ok {
		if b.version == "" {
			b.version = "(devel)"
		}
		return b
	}
	if b.version == "" {
		// a custom binary (app imported from another module) carries
		// fencepost as a dependency; the processor itself is the main
		// module
		b.version = bi.Main.Version
		for _, d := range bi.Deps {
			if d.Path == "github.com/fencepost-dev/fencepost" {
				b.version = d.Version
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if b.commit == "" {
				b.commit = s.Value
			}
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	if b.version == "" {
		b.version = "(devel)"
	}
	return b
}

// Version is the module version, for fencepost_build_info.
func (b Build) Version() string { return b.version }

// String is the version line's middle: "v1.2.3 (commit 0123abcd, 2026-01-02T03:04:05Z, modified)".
func (b Build) String() string {
	var extra []string
	if b.commit != "" {
		extra = append(extra, "commit "+b.commit)
	}
	if b.time != "" {
		extra = append(extra, b.time)
	}
	if b.modified {
		extra = append(extra, "modified")
	}
	if len(extra) == 0 {
		return b.version
	}
	return b.version + " (" + strings.Join(extra, ", ") + ")"
}

// Command returns the version command, which prints Read(env.Version,
// env.Commit).
func Command(env *clibase.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long: `version prints the module version and, for a binary built from a git
checkout (go build, go install), the commit, its time and whether the
checkout had uncommitted changes; then the Go version and platform.`,
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "processor %s %s %s/%s\n", Read(env.Version, env.Commit), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
