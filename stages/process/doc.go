// Package process is the pipeline's process stage: it runs the configured
// stages over the record batches the coordinator hands out, keeps records
// of a partition (or, with key ordering, of a key) in order, processes
// different partitions concurrently on a bounded pool, isolates records a
// stage rejects (retry with backoff, then the dead-letter sink or a stop
// of that partition), and reports every batch back exactly once: done,
// dropped, or stopped.
package process
