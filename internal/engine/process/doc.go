// Package process is the pipeline's process step: it runs the configured
// stages over the record batches the coordinator hands out (the
// Scheduler decides what runs when, the Chain runs records through the
// stages), keeps records of a partition (or, with key ordering, of a key)
// in order, processes different partitions concurrently on a bounded
// pool, isolates records a stage rejects (retry with backoff, then the
// dead-letter sink or a stop of that partition), and reports every batch
// back exactly once, with how far it finished.
//
// It is internal to the engine: package pipeline and package stagetest
// wire it. Stage authors test their stages with stagetest, which runs
// this code without showing any of it.
package process
