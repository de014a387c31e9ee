package sqlite

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"sync"
)

// compressor gzips summaries for the database, reusing its buffers (one per writer).
type compressor struct {
	buf bytes.Buffer
	zw  *gzip.Writer
}

// compress returns the gzip of b; the result is valid until the next call.
func (c *compressor) compress(b []byte) []byte {
	c.buf.Reset()
	if c.zw == nil {
		c.zw, _ = gzip.NewWriterLevel(&c.buf, gzip.BestSpeed)
	} else {
		c.zw.Reset(&c.buf)
	}
	_, _ = c.zw.Write(b)
	_ = c.zw.Close()
	return c.buf.Bytes()
}

var readers sync.Pool // of *gzip.Reader

// decompress returns the JSON of a stored summary.
func decompress(z []byte, id uint64) ([]byte, error) {
	zr, _ := readers.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(z))
	} else {
		err = zr.Reset(bytes.NewReader(z))
	}
	if err != nil {
		return nil, fmt.Errorf("recorder: tick %d: %w", id, err)
	}
	defer readers.Put(zr)
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("recorder: tick %d: %w", id, err)
	}
	return b, nil
}
