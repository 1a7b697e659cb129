// Package syncio has the writer the processor hands stages as standard
// output: one writer shared by stages running concurrently, so each Write
// (a whole line) lands whole.
package syncio

import (
	"io"
	"sync"
)

// Writer serializes writes to W. It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// NewWriter returns a Writer to w; a w that already is one is returned
// as is.
func NewWriter(w io.Writer) *Writer {
	if s, ok := w.(*Writer); ok {
		return s
	}
	return &Writer{W: w}
}

// Write writes p to W under the lock.
func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}
