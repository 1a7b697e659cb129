package fastjson

import (
	"slices"
	"strconv"
	"testing"
)

// TestSlabChunks: a slab hands out distinct zero elements, from chunks
// that start small (or as reserved) and double up to slabChunk.
func TestSlabChunks(t *testing.T) {
	tests := []struct {
		reserve int
		sizes   []int // of the chunks, in order, for 300 elements
	}{
		{0, []int{8, 16, 32, 64, 128, 128}},
		{1, []int{1, 8, 16, 32, 64, 128, 128}},
		{10, []int{10, 20, 40, 80, 128, 128}},
		{128, []int{128, 128, 128}},
		{1000, []int{128, 128, 128}},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.reserve), func(t *testing.T) {
			var s slab[[2]int]
			s.reserve(tt.reserve)
			seen := map[*[2]int]bool{}
			var sizes []int
			for i := range 300 {
				fresh := len(s.free) == 0
				p := s.next()
				if fresh || i == 0 {
					sizes = append(sizes, s.size)
				}
				if seen[p] || *p != [2]int{} {
					t.Fatalf("element %d: handed out before (%v) or not zero (%v)", i, seen[p], *p)
				}
				seen[p] = true
				*p = [2]int{i, i}
			}
			if !slices.Equal(sizes, tt.sizes) {
				t.Fatalf("chunks %v, want %v", sizes, tt.sizes)
			}
		})
	}
}
