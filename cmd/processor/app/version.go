package app

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the processor's version. Release builds set it with
// -ldflags "-X github.com/fencepost-dev/fencepost/cmd/processor/app.Version=v1.2.3";
// otherwise it comes from the module's build information.
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/fencepost-dev/fencepost" {
				return d.Version
			}
		}
		if bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "(devel)"
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "processor %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
