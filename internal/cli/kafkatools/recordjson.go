package kafkatools

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/recordjson"
)

// JSONRecord is a record as consume --output json writes it and produce
// --input json reads it, one per line (package recordjson). produce
// ignores topic and offset, and writes a record to the partition it names
// unless --partition or --by-key says otherwise.
type JSONRecord = recordjson.Record

// JSONHeader is a record header of a JSONRecord.
type JSONHeader = recordjson.Header

// toJSONRecord is r's JSON form.
func toJSONRecord(r *kgo.Record) JSONRecord {
	j := JSONRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	j.Key, j.KeyBase64 = recordjson.EncodeBytes(r.Key)
	j.Value, j.ValueBase64 = recordjson.EncodeBytes(r.Value)
	for _, h := range r.Headers {
		jh := JSONHeader{Key: h.Key}
		jh.Value, jh.ValueBase64 = recordjson.EncodeBytes(h.Value)
		j.Headers = append(j.Headers, jh)
	}
	return j
}

// fromJSONRecord returns the record j describes (key, value, headers, and
// the timestamp if set).
func fromJSONRecord(j JSONRecord) (*kgo.Record, error) {
	var (
		r   = &kgo.Record{}
		err error
	)
	if r.Key, err = recordjson.DecodeBytes(j.Key, j.KeyBase64, "key"); err != nil {
		return nil, err
	}
	if r.Value, err = recordjson.DecodeBytes(j.Value, j.ValueBase64, "value"); err != nil {
		return nil, err
	}
	for _, h := range j.Headers {
		if h.Key == "" {
			return nil, errors.New("a header without a key")
		}
		v, err := recordjson.DecodeBytes(h.Value, h.ValueBase64, "header "+h.Key+" value")
		if err != nil {
			return nil, err
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
	}
	if j.Timestamp != "" {
		if r.Timestamp, err = time.Parse(time.RFC3339Nano, j.Timestamp); err != nil {
			return nil, fmt.Errorf("timestamp %q: use RFC 3339", j.Timestamp)
		}
		if r.Timestamp.Before(minTimestamp) || r.Timestamp.After(maxTimestamp) {
			return nil, fmt.Errorf("timestamp %q is outside what a Kafka record can hold: use a time from %s to %s",
				j.Timestamp, minTimestamp.Format(time.RFC3339Nano), maxTimestamp.Format(time.RFC3339Nano))
		}
	}
	return r, nil
}

// The timestamps a record can carry: Kafka counts milliseconds since
// 1970-01-01 UTC (negative values mean none), and the client converts
// through nanoseconds since then in an int64, which ends in 2262; a
// later time would be written as another date.
var (
	minTimestamp = time.UnixMilli(0).UTC()
	maxTimestamp = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Millisecond)
)
