package recordjson

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestBytesRoundTrip: UTF-8 travels as text, anything else as base64,
// nil as neither, and each comes back as it was.
func TestBytesRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		in       []byte
		text, b6 bool // which field holds it
	}{
		{"null", nil, false, false},
		{"empty", []byte{}, true, false},
		{"text", []byte(`{"a":"é"}`), true, false},
		{"binary", []byte{0, 0xff, 0x80}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, b64 := EncodeBytes(tt.in)
			if (text != nil) != tt.text || (b64 != nil) != tt.b6 {
				t.Fatalf("text %v, base64 %v", text, b64)
			}
			out, err := DecodeBytes(text, b64, "value")
			if err != nil || !bytes.Equal(out, tt.in) || (out == nil) != (tt.in == nil) {
				t.Errorf("decoded %q (%v), want %q", out, err, tt.in)
			}
		})
	}
}

func TestDecodeBytesErrors(t *testing.T) {
	a, b := "a", "!!"
	if _, err := DecodeBytes(&a, &a, "key"); err == nil || !strings.Contains(err.Error(), "key and key_base64 are both set") {
		t.Errorf("both set: %v", err)
	}
	if _, err := DecodeBytes(nil, &b, "value"); err == nil || !strings.HasPrefix(err.Error(), "value_base64: ") {
		t.Errorf("bad base64: %v", err)
	}
}

func TestTimestamp(t *testing.T) {
	if got := Timestamp(time.Time{}); got != "" {
		t.Errorf("zero time: %q", got)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("X", 3600))
	if got := Timestamp(at); got != "2026-01-02T02:04:05.006Z" {
		t.Errorf("got %q", got)
	}
}
