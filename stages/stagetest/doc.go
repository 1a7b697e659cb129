// Package stagetest runs stages the way a pipeline does, without a
// broker, so stage authors can test what matters: which records come
// out, which are dead-lettered with which headers, and which offsets
// would be committed.
//
//   - [Run] passes records through the pipeline's own process step (its
//     scheduler and chain: ordering, failure isolation, retries,
//     dead-letter and stop policy), one batch per partition, partitions
//     concurrently, checks the record path's promises, and returns a
//     [Result]; a [Runner] sets the [Policy] and key ordering.
//   - [Build] builds a registered stage from options the way a
//     configuration file does: unknown options, missing required ones,
//     wrong types and enum values are rejected, defaults are applied.
//   - [Env] gives a stages.Env whose Stdout is a [Buffer] or any writer
//     and whose producers are an in-memory [Producer] that can be made to
//     fail.
//   - [Counters] keeps what a stage counts (stages.Env.Counter: records
//     it dropped as late, as duplicates ...) for the test to read.
//
// A typical test:
//
//	st, err := stagetest.Build("filter", stages.Options{"if": `json?.ok == true`}, stagetest.Env(nil, nil))
//	// check err
//	res := stagetest.Run(t, records, stagetest.NamedStage{Name: "filter", Stage: st}) // fails t on a broken promise
//	// check res.Outputs, res.DeadLetters, res.Marks
package stagetest
