// Package fetch is the pipeline's fetch step: one multi-partition Fetch
// request per broker over a connection of its own (kafkawire.Conn, framed
// with franz-go's kmsg), each partition with its leader epoch, decoded
// into immutable [Batch]es, and the metadata refresher that tells the
// coordinator which broker leads each partition, in which leader epoch.
// Broker errors are classified by kafkawire.Classify, the table the
// resolve step uses too.
//
// The coordinator decides what to fetch (an offsets.FetchRequest) and
// what to do with the answer; this package only talks to Kafka. Every
// request is answered: a Fetcher returns one PartitionResult per entry,
// even when the request fails as a whole.
//
// It is the engine's: package pipeline wires it, and nothing in it is
// needed to write a stage (package stages) or to run a pipeline (package
// pipeline). Its API serves the pipeline and may change.
package fetch
