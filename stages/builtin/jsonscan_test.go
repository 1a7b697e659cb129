package builtin

import (
	"fmt"
	"testing"

	"github.com/fencepost-dev/fencepost/internal/shopevents"
)

// BenchmarkScanJSON checks values as the json stage does per record:
// bench/compare's shop events (short strings) and values with longer
// text (a 120-byte description and a URL).
func BenchmarkScanJSON(b *testing.B) {
	for _, c := range []struct {
		name  string
		value func(i int64) []byte
	}{
		{"shop", shopevents.Value},
		{"text", func(i int64) []byte {
			return []byte(fmt.Sprintf(`{"id":%d,"title":"Item number %d of the catalogue","description":"A longer description of the item, as `+
				`product feeds carry: materials, sizes and care instructions, %d","url":"https://shop.example.com/items/%d?ref=feed"}`, i, i, i, i))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			values := make([][]byte, 1000)
			n := 0
			for i := range values {
				values[i] = c.value(int64(i))
				n += len(values[i])
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, v := range values {
					if !scanJSON(v).valid {
						b.Fatal("invalid")
					}
				}
			}
		})
	}
}
