package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/offsetstore"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// A pipeline with one stage, run against an in-process broker until it
// has seen three records; Run then drains, commits and leaves the group.
func Example() {
	cluster, err := kafkatest.Start(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	if err := cluster.CreateTopicE("greetings", 1); err != nil {
		fmt.Println(err)
		return
	}
	words := []string{"hello", "bonjour", "hallo"}
	if err := cluster.ProduceE("greetings", 0, len(words), 1, func(i int) []byte { return []byte(words[i]) }); err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := context.WithCancel(context.Background())
	seen := 0
	shout := stages.StageFunc(func(_ context.Context, in []stages.Record) ([]stages.Record, error) {
		for _, r := range in {
			fmt.Printf("%d: %s\n", r.Offset, strings.ToUpper(string(r.Value)))
			if seen++; seen == len(words) {
				stop()
			}
		}
		return in, nil
	})
	p, err := pipeline.New(pipeline.Config{
		Kafka:    pipeline.KafkaConfig{Brokers: cluster.Addrs},
		Consumer: pipeline.ConsumerConfig{Group: "example", Topics: []string{"greetings"}, Concurrency: 1},
	}, pipeline.WithStage("shout", shout), pipeline.OnReset(func(ev offsetstore.ResetEvent) {
		fmt.Fprintf(os.Stderr, "%s starts at %d (%s)\n", ev.Partition, ev.To, ev.Reason)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0: HELLO
	// 1: BONJOUR
	// 2: HALLO
}
