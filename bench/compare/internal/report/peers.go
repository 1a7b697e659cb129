package report

import (
	"strings"

	"github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"
)

// peerNames are the peers as the report names them, with their versions.
var peerNames = map[pipebench.Engine]string{
	pipebench.Benthos:      "Benthos v4.27.0",
	pipebench.KafkaStreams: "Kafka Streams " + pipebench.StreamsKafkaVersion,
}

// pipelineTitle names the engines of p's variants that ran, fencepost
// first: "fencepost against Benthos v4.27.0 and Kafka Streams 4.1.1".
func pipelineTitle(p *Pipeline) string {
	var peers []string
	seen := map[pipebench.Engine]bool{}
	fencepost := false
	for _, v := range p.Variants {
		if len(v.Runs) == 0 || seen[v.Engine] {
			continue
		}
		seen[v.Engine] = true
		if name, ok := peerNames[v.Engine]; ok {
			peers = append(peers, name)
		} else {
			fencepost = true
		}
	}
	switch {
	case len(peers) == 0:
		return "fencepost"
	case !fencepost:
		return strings.Join(peers, " and ")
	}
	return "fencepost against " + strings.Join(peers, " and ")
}
