// Package recordjson is the JSON form of a Kafka record, one object per
// line, that "processor consume -o json" and the log stage's json format
// print and "processor produce -i json" reads, so that any of those lines
// can be written back to a topic. Bytes that are valid UTF-8 are a string
// (key, value), others base64 (key_base64, value_base64); a null key or
// value has neither. Headers are a list, in order, duplicates kept.
package recordjson

import (
	"encoding/base64"
	"fmt"
	"time"
	"unicode/utf8"
)

// Record is one record's JSON form.
type Record struct {
	Topic       string   `json:"topic,omitempty"`
	Partition   int32    `json:"partition"`
	Offset      int64    `json:"offset"`
	Timestamp   string   `json:"timestamp,omitempty"` // RFC 3339, UTC
	Key         *string  `json:"key,omitempty"`
	KeyBase64   *string  `json:"key_base64,omitempty"`
	Value       *string  `json:"value,omitempty"`
	ValueBase64 *string  `json:"value_base64,omitempty"`
	Headers     []Header `json:"headers,omitempty"`
}

// Header is a record header; its value is encoded like a key.
type Header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

// Timestamp is t as Record.Timestamp holds it ("" for the zero time).
func Timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// EncodeBytes returns b as text or base64 (nil b: neither).
func EncodeBytes(b []byte) (text, b64 *string) {
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

// DecodeBytes is EncodeBytes' inverse; what names the field in errors.
func DecodeBytes(text, b64 *string, what string) ([]byte, error) {
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
