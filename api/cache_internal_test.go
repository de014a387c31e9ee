package api

import (
	"sync"
	"sync/atomic"
	"testing"
)

// A burst of reads of one old tick reads the recorder once.
func TestCacheLoadsOnce(t *testing.T) {
	c, err := NewCache(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var fetches atomic.Int64
	release := make(chan struct{})
	fetch := func() ([]byte, error) {
		fetches.Add(1)
		<-release
		return []byte(`{"tick_id":7}`), nil
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if b, err := c.load(7, false, fetch); err != nil || string(b) != `{"tick_id":7}` {
				t.Errorf("load: %q, %v", b, err)
			}
		})
	}
	for c.inFlight() == 0 {
		// the first load is fetching
	}
	close(release)
	wg.Wait()
	if _, err := c.load(7, false, fetch); err != nil {
		t.Fatal(err)
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for one id; want 1", n)
	}
	var nilCache *Cache
	if b, err := nilCache.load(1, false, func() ([]byte, error) { return []byte("x"), nil }); err != nil || string(b) != "x" {
		t.Fatal("a nil cache must fetch")
	}
}

func (c *Cache) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.loading)
}
