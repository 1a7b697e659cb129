package realkafka

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
)

// TestNewClusterIDNeverStartsWithDash feeds the generator an id whose
// base64 starts with '-' (first six bits 62) and checks it draws again, as
// Kafka does; StorageTool refused such an id as an option and failed CI.
func TestNewClusterIDNeverStartsWithDash(t *testing.T) {
	dash := bytes.Repeat([]byte{0xF8}, 16) // 111110.. encodes as '-'
	if s := base64.RawURLEncoding.EncodeToString(dash); !strings.HasPrefix(s, "-") {
		t.Fatalf("test input %q does not start with '-'", s)
	}
	plain := bytes.Repeat([]byte{0x01}, 16)
	tests := []struct {
		name   string
		random []byte
		want   string
	}{
		{"first draw ok", plain, base64.RawURLEncoding.EncodeToString(plain)},
		{"dash drawn again", append(append([]byte{}, dash...), plain...), base64.RawURLEncoding.EncodeToString(plain)},
		{"two dashes", append(append(append([]byte{}, dash...), dash...), plain...), base64.RawURLEncoding.EncodeToString(plain)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newClusterID(bytes.NewReader(tt.random))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("newClusterID = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := newClusterID(bytes.NewReader(dash)); err == nil {
		t.Fatal("newClusterID with only a dash id and then no more bytes: want an error, got nil")
	}
	for i := 0; i < 2000; i++ {
		got, err := newClusterID(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 22 || strings.HasPrefix(got, "-") {
			t.Fatalf("newClusterID = %q: want 22 characters not starting with '-'", got)
		}
	}
}
