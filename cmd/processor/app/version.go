package app

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Version and Commit are the processor's version and source commit.
// Release builds set them with -ldflags "-X
// github.com/fencepost-dev/fencepost/cmd/processor/app.Version=v1.2.3 -X
// ...app.Commit=0123abcd"; otherwise they come from the build
// information: the module version, and the commit Go records when it
// builds from a git clone (go build or go install with -buildvcs not
// false; a git worktree is not recognized).
var (
	Version = ""
	Commit  = ""
)

// build is what the binary knows about how it was built.
type build struct {
	version  string // module version, "(devel)" if unknown
	commit   string // VCS revision, when built from a checkout
	time     string // the revision's commit time
	modified bool   // the checkout had uncommitted changes
}

func readBuild() build {
	bi, ok := debug.ReadBuildInfo()
	return buildFrom(bi, ok)
}

// buildFrom reads the build information Go recorded (ok false: none),
// with Version and Commit taking precedence.
func buildFrom(bi *debug.BuildInfo, ok bool) build {
	b := build{version: Version, commit: Commit}
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

// buildVersion is the module version, for fencepost_build_info.
func buildVersion() string { return readBuild().version }

// String is the version line's middle: "v1.2.3 (commit 0123abcd, 2026-01-02T03:04:05Z, modified)".
func (b build) String() string {
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

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long: `version prints the module version and, for a binary built from a git
checkout (go build, go install), the commit, its time and whether the
checkout had uncommitted changes; then the Go version and platform.`,
		Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "processor %s %s %s/%s\n", readBuild(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
