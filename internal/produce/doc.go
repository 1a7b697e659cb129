// Package produce is the engine's own Kafka producer: idempotent by
// default, transactional with a transactional id (KIP-98, and KIP-447's
// consumer-group offsets in the transaction). It writes every output and
// dead-letter record of the pipeline.
//
// What is ours and what is kafka-go's:
//
//   - Ours: the record batches (format v2, encoded by batchEncoder into
//     reused buffers, CRC-32C, transactional attribute, null distinct
//     from empty, optionally compressed: Config.Compression);
//     partitioning (a keyed record goes where internal/partitioner's
//     Murmur2 puts it, as with the Java producer, or where the
//     placement given to ProduceBy does); the per-partition sequence
//     numbers and their retry rules; the transaction state machine and
//     every retry rule of the transaction requests. Error codes are
//     classified by the table every caller shares
//     (kafkawire.ClassifyCode); what a produce or a transaction request
//     does with each class is here.
//   - kafka-go's: the wire. Requests are kafka-go's protocol types
//     (rawproduce with our encoded record set, initproducerid,
//     addpartitionstotxn, addoffsetstotxn, txnoffsetcommit, endtxn,
//     metadata), sent through a kafka.Transport (kafkawire.Client),
//     which negotiates versions, routes a produce request to the
//     partitions' leader from its metadata cache, and finds the
//     transaction or group coordinator for the coordinator requests.
//
// Idempotence: each partition has at most one batch in flight, and a
// batch keeps its sequence number across retries, so the broker drops a
// retry of a batch it already wrote. A batch given up on after it was
// sent may have been written: the idempotent producer then takes a new
// producer id (sequences restart), the transactional one makes the
// transaction abortable. OUT_OF_ORDER_SEQUENCE_NUMBER and
// UNKNOWN_PRODUCER_ID (the broker lost the producer's state) renew the
// producer id and send the refused batch again; DUPLICATE_SEQUENCE_NUMBER
// is success.
//
// The transport's metadata cache must know every topic written (a
// kafka.Transport with MetadataTopics set knows only those).
//
// Transactions: Begin (the first initializes, fencing older producers of
// the same transactional id), Produce (partitions are added to the
// transaction as they are first written), SendOffsets (the consumer
// offsets, with the member's generation, member id and instance id),
// Commit or Abort. Errors the caller acts on: ErrProducerFenced (stop:
// another instance owns the id), *AbortableError (Abort, then redo the
// work from the committed offsets), *FatalError (configuration,
// permission, a version or compression the broker does not support),
// *SinkError (the topic is missing or may not be written).
// As pipeline.Producer documents (it is this producer, idempotent),
// Produce marks the failures of the destination rather than of the
// records (a *SinkError, transient errors past MaxAttempts)
// stages.Unavailable, and records the broker will never take
// stages.Permanent.
// Config.OnTxnFailed is told once each time the transaction becomes
// abortable or the producer fails for good.
//
// Two rules decide what a failed Produce does to the transaction:
//
//   - A call that may have written something (a request of it reached a
//     broker, and not every batch of it was refused outright) makes the
//     transaction abortable: part of its records may be in the
//     transaction, and retrying the call would commit them twice. A
//     call that wrote nothing (refused before any request was sent: a
//     record larger than MaxBatchBytes, which refuses the whole call, a
//     topic missing from the metadata, ctx ended first; or every batch
//     refused by the broker with a permanent error) leaves the
//     transaction open, and its error is what the idempotent producer
//     would return: the caller may dead-letter the records inside the
//     transaction, which can still commit.
//   - The errors that mean the transaction is over (an *AbortableError,
//     ErrNotInTransaction, ErrProducerFenced, a *FatalError) are
//     returned marked stages.Unavailable, so that the process chain
//     holds the partition and retries rather than dead-letter or stop,
//     until its owner aborts the transaction and calls the work off.
package produce
