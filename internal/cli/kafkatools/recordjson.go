package kafkatools

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// JSONRecord is a record as consume --output json writes it and produce
// --input json reads it, one per line. Bytes that are valid UTF-8 are
// written as a string (key, value), others base64-encoded (key_base64,
// value_base64); a null key or value has neither. produce ignores topic
// and offset, and writes a record to the partition it names unless
// --partition says otherwise.
type JSONRecord struct {
	Topic       string       `json:"topic,omitempty"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   string       `json:"timestamp,omitempty"` // RFC 3339, UTC
	Key         *string      `json:"key,omitempty"`
	KeyBase64   *string      `json:"key_base64,omitempty"`
	Value       *string      `json:"value,omitempty"`
	ValueBase64 *string      `json:"value_base64,omitempty"`
	Headers     []JSONHeader `json:"headers,omitempty"`
}

// JSONHeader is a record header; its value is encoded like a key.
type JSONHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// encodeBytes returns b as text or base64 (nil b: neither).
func encodeBytes(b []byte) (text, b64 *string) {
	switch {
	case b == nil:
		return nil, nil
	case utf8.Valid(b):
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// decodeBytes is encodeBytes' inverse; what names the field in errors.
func decodeBytes(text, b64 *string, what string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("%s and %s_base64 are both set: give one", what, what)
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", what, err)
		}
		return b, nil
	}
	return nil, nil
}

func toJSONRecord(r *kgo.Record) JSONRecord {
	j := JSONRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
	j.Key, j.KeyBase64 = encodeBytes(r.Key)
	j.Value, j.ValueBase64 = encodeBytes(r.Value)
	for _, h := range r.Headers {
		jh := JSONHeader{Key: h.Key}
		jh.Value, jh.ValueBase64 = encodeBytes(h.Value)
		j.Headers = append(j.Headers, jh)
	}
	return j
}

// record returns the record j describes (key, value, headers, and the
// timestamp if set).
func (j JSONRecord) record() (*kgo.Record, error) {
	var (
		r   = &kgo.Record{}
		err error
	)
	if r.Key, err = decodeBytes(j.Key, j.KeyBase64, "key"); err != nil {
		return nil, err
	}
	if r.Value, err = decodeBytes(j.Value, j.ValueBase64, "value"); err != nil {
		return nil, err
	}
	for _, h := range j.Headers {
		if h.Key == "" {
			return nil, errors.New("a header without a key")
		}
		v, err := decodeBytes(h.Value, h.ValueBase64, "header "+h.Key+" value")
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
