// Package produce is the engine's own Kafka producer: idempotent by
// default, transactional with a transactional id (KIP-98, and KIP-447's
// consumer-group offsets in the transaction). It exists because
// kafka-go's Writer has neither: no transactions, and its record-set
// writer always writes producer id, epoch and base sequence as -1.
//
// What is ours and what is kafka-go's:
//
//   - Ours: the record batches (format v2, encoded by batchEncoder into
//     reused buffers, CRC-32C, transactional attribute, null distinct
//     from empty, optionally compressed: Config.Compression); partitioning (FNV-1a as kafka-go's Hash balancer, so
//     keys keep the partitions the kafka-go Writer gave them); the
//     per-partition sequence numbers and their retry rules; the
//     transaction state machine and every retry or classification rule
//     of the transaction requests.
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
// work from the committed offsets), *FatalError (configuration or
// permission), *SinkError (the topic is missing or may not be written).
package produce
