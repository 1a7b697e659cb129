package offsetstore

import "strconv"

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats the partition as "topic/partition".
func (tp TopicPartition) String() string {
	return tp.Topic + "/" + strconv.FormatInt(int64(tp.Partition), 10)
}

// Epoch numbers the incarnations of a partition's position. Every
// assignment, reset and seek gives the partition a new, larger epoch; a
// result that carries an older epoch describes a position that no longer
// exists and must be dropped. The zero Epoch is never assigned to a
// partition.
type Epoch uint64
