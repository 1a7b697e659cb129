// Command benthos is a minimal Benthos v4.27.0 binary for the comparison
// benchmarks: the core (public/service), the Kafka components and the
// pure ones (processors such as mapping, brokers, buffers), nothing that
// talks to other systems, so it builds quickly. It runs the configuration
// files in bench/compare/configs the way the full benthos binary would:
//
//	benthos -c configs/benthos-defaults.yaml
package main

import (
	"context"

	_ "github.com/benthosdev/benthos/v4/public/components/kafka"
	_ "github.com/benthosdev/benthos/v4/public/components/pure"
	"github.com/benthosdev/benthos/v4/public/service"
)

func main() {
	service.RunCLI(context.Background())
}
