package api

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache keeps encoded summaries (their JSON, and its gzip for clients that accept it) by
// tick id, with the cost of an entry in bytes. It sits in front of the in-memory history
// and the recorder and may drop any entry: it is never the only copy. Create it with
// NewCache, pass it in Options.Cache, and Close it after the server has stopped.
type Cache struct {
	c *ristretto.Cache[uint64, []byte]

	mu      sync.Mutex
	loading map[uint64]*loadCall // guarded by mu: reads of the recorder in flight, by key
}

type loadCall struct {
	done chan struct{}
	body []byte
	err  error
}

// NewCache returns a cache of at most maxBytes of encoded summaries.
func NewCache(maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("api: cache size %d: must be > 0", maxBytes)
	}
	// About one counter per 512 bytes of capacity: ten per entry of a small summary.
	c, err := ristretto.NewCache(&ristretto.Config[uint64, []byte]{
		NumCounters: max(maxBytes/512, 1024), MaxCost: maxBytes, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("api: cache: %w", err)
	}
	return &Cache{c: c, loading: make(map[uint64]*loadCall)}, nil
}

// Close stops the cache's goroutines.
func (c *Cache) Close() {
	if c != nil {
		c.c.Close()
	}
}

func cacheKey(id uint64, gz bool) uint64 {
	k := id << 1
	if gz {
		k |= 1
	}
	return k
}

func (c *Cache) get(id uint64, gz bool) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	return c.c.Get(cacheKey(id, gz))
}

func (c *Cache) put(id uint64, gz bool, body []byte) {
	if c != nil {
		c.c.Set(cacheKey(id, gz), body, int64(len(body)))
	}
}

// load returns the body of key, from the cache or from fetch; concurrent loads of one key
// call fetch once, and the body is in the cache before the next load of the key looks.
func (c *Cache) load(id uint64, gz bool, fetch func() ([]byte, error)) ([]byte, error) {
	if c == nil {
		return fetch()
	}
	if b, ok := c.get(id, gz); ok {
		return b, nil
	}
	k := cacheKey(id, gz)
	c.mu.Lock()
	if l, ok := c.loading[k]; ok {
		c.mu.Unlock()
		<-l.done
		return l.body, l.err
	}
	l := &loadCall{done: make(chan struct{})}
	c.loading[k] = l
	c.mu.Unlock()
	l.body, l.err = fetch()
	if l.err == nil {
		c.c.Set(k, l.body, int64(len(l.body)))
		c.c.Wait() // visible to Get before the load is forgotten
	}
	c.mu.Lock()
	delete(c.loading, k)
	c.mu.Unlock()
	close(l.done)
	return l.body, l.err
}

// gzipMin is the smallest body worth compressing.
const gzipMin = 1024

// acceptsGzip reports whether the request accepts a gzip body (q=0 refuses it).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b) / 4)
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}
