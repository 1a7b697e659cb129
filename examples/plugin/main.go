// Command processor is the fencepost processor with one more stage,
// "redact": the way a team ships its own stages.
package main

import (
	"os"

	"github.com/fencepost-dev/fencepost/cmd/processor/app" // the processor, with the built-in stages

	_ "example.com/fencepost-plugin/redact" // our stage
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
