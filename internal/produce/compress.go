package produce

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression is a record batch codec; its value is the codec's number
// in a batch's attributes.
type Compression int8

// The codecs Kafka knows.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2 // one raw snappy block, as franz-go and kafka-go write it
	CompressionLZ4    Compression = 3 // the LZ4 frame format
	CompressionZstd   Compression = 4 // needs Produce v7 (Kafka 2.1)
)

// String is the codec's name as Kafka's configuration spells it.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", int8(c))
}

// appender is an io.Writer appending to a slice, so a streaming
// compressor writes into a reused buffer.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

var (
	gzipWriters = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression); return w }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	// one encoder for every producer: EncodeAll is safe for concurrent
	// use and starts no goroutine
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(err) // only bad options fail
		}
		return e
	})
)

// streamWriter is a pooled stream compressor (gzip's, lz4's).
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// compressStream appends src compressed by w (reset to write there) to
// dst.
func compressStream(w streamWriter, dst, src []byte) ([]byte, error) {
	a := appender{b: dst}
	w.Reset(&a)
	if _, err := w.Write(src); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return a.b, nil
}

// compress appends src compressed with codec to dst.
func compress(dst, src []byte, codec Compression) ([]byte, error) {
	switch codec {
	case CompressionGzip:
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		return compressStream(w, dst, src)
	case CompressionSnappy:
		n := snappy.MaxEncodedLen(len(src))
		out := growTo(dst, len(dst)+n)
		enc := snappy.Encode(out[len(dst):len(dst)+n], src)
		return out[:len(dst)+len(enc)], nil
	case CompressionLZ4:
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		return compressStream(w, dst, src)
	case CompressionZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// growTo returns b with a length of at least n, keeping its contents.
func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		nb := make([]byte, n, n+n/4)
		copy(nb, b)
		return nb
	}
	return b[:n]
}
