// Package fetch is the pipeline's fetch step: multi-partition Fetch
// requests to each broker on connections of its own (internal/kafkawire,
// framed with franz-go's kmsg), each partition with its leader epoch,
// record batches decoded from the response bytes into immutable
// [Batch]es, and the metadata refresher that tells the coordinator which
// broker leads each partition, in which leader epoch. Broker errors are
// classified by kafkawire.Classify, the table the resolve step uses too.
//
// The coordinator decides what to fetch (an offsets.FetchRequest) and
// what to do with the answer; this package only talks to Kafka. Every
// request is answered: a Fetcher returns one PartitionResult per entry,
// even when the request fails as a whole.
//
// It is internal to the engine: package pipeline wires it, and nothing
// outside this module can import it.
package fetch
