package fetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressed bounds what one compressed batch may decompress to: a
// batch claiming more is treated as corrupt rather than allocated.
const maxDecompressed = 256 << 20

var errTooLarge = fmt.Errorf("decompresses to more than %d MiB", maxDecompressed>>20)

// codecs decompresses record batch payloads. It is safe for concurrent
// use; every result is a new buffer, never reused (records point into
// it).
type codecs struct {
	gzips sync.Pool // *gzip.Reader
	lz4s  sync.Pool // *lz4.Reader
	zstd  *zstd.Decoder
}

func newCodecs() *codecs {
	// concurrency 1 per call: DecodeAll is safe for concurrent use and
	// the fetchers decode in parallel already
	z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecompressed),
		zstd.WithDecoderMaxWindow(maxDecompressed))
	if err != nil {
		panic(err) // only bad options fail
	}
	return &codecs{zstd: z}
}

// close releases the zstd decoder's goroutines.
func (c *codecs) close() { c.zstd.Close() }

// decompress returns the payload of a batch compressed with codec
// (attributes & 7): src itself when it is not compressed.
func (c *codecs) decompress(codec int16, src []byte) ([]byte, error) {
	switch codec {
	case 0:
		return src, nil
	case 1:
		return c.gunzip(src)
	case 2:
		return unsnappy(src)
	case 3:
		return c.unlz4(src)
	case 4:
		out, err := c.zstd.DecodeAll(src, nil)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func (c *codecs) gunzip(src []byte) ([]byte, error) {
	r, _ := c.gzips.Get().(*gzip.Reader)
	var err error
	if r == nil {
		r, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = r.Reset(bytes.NewReader(src))
	}
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	defer c.gzips.Put(r)
	out, err := readAll(r, 4*len(src))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, nil
}

func (c *codecs) unlz4(src []byte) ([]byte, error) {
	r, _ := c.lz4s.Get().(*lz4.Reader)
	if r == nil {
		r = lz4.NewReader(bytes.NewReader(src))
	} else {
		r.Reset(bytes.NewReader(src))
	}
	defer c.lz4s.Put(r)
	out, err := readAll(r, 4*len(src))
	if err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	return out, nil
}

// readAll reads r to its end into a new buffer (sized for hint bytes),
// failing past maxDecompressed.
func readAll(r io.Reader, hint int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(max(hint, 512), maxDecompressed)))
	n, err := buf.ReadFrom(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if n > maxDecompressed {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// xerialMagic starts a snappy payload in the framing of the Java
// client's snappy-java (blocks, each with a length); other clients write
// one raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func unsnappy(src []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(nil, src)
	}
	if len(src) < 16 {
		return nil, errors.New("snappy: short xerial header")
	}
	var out []byte
	for b := src[16:]; len(b) > 0; {
		if len(b) < 4 {
			return nil, errors.New("snappy: short xerial block length")
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, errors.New("snappy: xerial block runs past the payload")
		}
		var err error
		if out, err = snappyBlock(out, b[4:4+n]); err != nil {
			return nil, err
		}
		b = b[4+n:]
	}
	return out, nil
}

// snappyBlock appends the decoded block to dst.
func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > maxDecompressed || len(dst)+n > maxDecompressed {
		return nil, errTooLarge
	}
	out := make([]byte, len(dst)+n)
	copy(out, dst)
	if _, err := snappy.Decode(out[len(dst):], block); err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return out, nil
}
