// Package kafkatools holds the processor's Kafka tools, on franz-go:
// offsets (describe a consumer group's committed offsets against the log,
// reset them), consume (print records), produce (write records from
// stdin), topics (list, create, delete) and state (read the stores of
// stages with state from the local state directory or their changelog
// topics, reset them). They reach the cluster through a configuration
// file's kafka: section or flags (clusterFlags), and share one JSON form
// of a record (JSONRecord).
package kafkatools

import (
	"github.com/spf13/cobra"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
)

// cli is the environment the tools run in.
type cli struct{ *clibase.Env }

// OffsetsCommand returns the offsets command (describe, reset).
func OffsetsCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).offsetsCmd() }

// ConsumeCommand returns the consume command.
func ConsumeCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).consumeCmd() }

// TopicsCommand returns the topics command (list, create, delete).
func TopicsCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).topicsCmd() }

// ProduceCommand returns the produce command, which reads env.Stdin.
func ProduceCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).produceCmd() }

// StateCommand returns the state command (get, scan, count, reset).
func StateCommand(env *clibase.Env) *cobra.Command { return (&cli{env}).stateCmd() }
