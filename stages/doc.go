// Package stages is the stage-plugin API: the [Record] that flows through a
// pipeline, the [Stage] interface every processing step implements, the
// [Spec] and registry that let a configuration file name a stage, the
// [Env] a stage is built with (a [Logger], standard output, producers),
// and what the pipeline makes of a stage's failures ([RecordErrors],
// [Permanent], [StoppedError], the dead-letter headers).
//
// A plugin author needs this package, package stagetest (to test a stage
// without a broker) and package cmd/processor/app (to ship a processor
// binary with it); see examples/plugin.
//
// The built-in stages (filter, map, json, produce, log, and the stateful
// aggregate and dedupe) are in package builtin. The pipeline's own steps live in the sub-packages named after
// the pipeline's shape: resolve, fetch, process and commit; they are the
// engine's, and a stage needs none of them.
package stages
