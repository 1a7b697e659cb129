// Command processor is fencepost's stream processor: run a pipeline from a
// configuration file, lint configurations, list stages, or start a local
// Kafka-protocol broker. See package app, and "processor --help".
package main

import (
	"os"

	"github.com/fencepost-dev/fencepost/cmd/processor/app"
)

func main() { os.Exit(app.Main(os.Args[1:])) }
