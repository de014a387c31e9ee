package cycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/cycled/cycled/faultsummary"
)

// heldCheck compares later encodings of summaries with their encoding when published, and
// keeps the first difference.
type heldCheck struct {
	mu        sync.Mutex
	published map[uint64][]byte // guarded by mu
	first     string            // guarded by mu: the first difference seen
	compared  int               // guarded by mu
}

// encodeLines encodes the module lines of s read from its records, as its first encoding
// reads them: s.Modules (and so MarshalJSON) reads them once and keeps a copy, so that a
// reader who first encodes a summary long after its tick, such as a slow subscriber, reads
// the records then. Reading them line by line each time, as such a reader would, makes
// every encoding here a read of the records.
func encodeLines(s *faultsummary.Summary) ([]byte, error) {
	ms := make([]faultsummary.Module, s.NumModules())
	for i := range ms {
		s.ModuleInto(i, &ms[i])
	}
	return json.Marshal(ms)
}

// publish records the encoding of s as published.
func (c *heldCheck) publish(t *testing.T, s *faultsummary.Summary) {
	b, err := encodeLines(s)
	if err != nil {
		t.Errorf("encoding tick %d: %v", s.TickID, err)
		return
	}
	c.mu.Lock()
	c.published[s.TickID] = b
	c.mu.Unlock()
}

// recheck encodes s again, now, and compares the bytes with those published.
func (c *heldCheck) recheck(who string, s *faultsummary.Summary) {
	b, err := encodeLines(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	want, ok := c.published[s.TickID]
	switch {
	case !ok:
		return // not published yet (an encoder can see the latest before the hooks ran)
	case err != nil && c.first == "":
		c.first = fmt.Sprintf("%s: encoding tick %d again: %v", who, s.TickID, err)
	case !bytes.Equal(b, want) && c.first == "":
		c.first = fmt.Sprintf("%s: tick %d changed while held:\n got %s\nwant %s", who, s.TickID, b, want)
	}
	c.compared++
}

// slowSubscriber reads the stream only when told to (on drain), then encodes every summary
// it finds buffered, held there since its publication. Once drain is closed it reads the
// rest until sub is closed, and returns.
func slowSubscriber(c *heldCheck, sub *faultsummary.Subscription, drain <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for range drain {
		for more := true; more; {
			select {
			case ev, ok := <-sub.C():
				if !ok {
					<-drain // closed by the test once it closed sub
					return
				}
				if ev.Summary != nil {
					c.recheck("slow subscriber", ev.Summary)
				}
			default:
				more = false
			}
		}
	}
	for ev := range sub.C() {
		if ev.Summary != nil {
			c.recheck("slow subscriber", ev.Summary)
		}
	}
}

// latestEncoder encodes the latest summary as a reader would answer it over HTTP, lets the
// ticks go on while it holds it, and encodes it again, until stop is closed.
func latestEncoder(c *heldCheck, e *Engine, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		default:
		}
		s := e.Latest()
		if s == nil {
			runtime.Gosched()
			continue
		}
		c.recheck("encoder", s)
		for range 200 {
			runtime.Gosched()
		}
		c.recheck("encoder, later", s)
	}
}

// TestHeldSummariesNeverChange proves, without the race detector (under which no record is
// reused, see recPool), that the pool never recycles a record a reader still refers to.
// While the ticks reuse the records of the summaries nobody holds any more, three readers
// hold theirs: a Hook keeping the last holdTicks summaries, a stream subscriber that reads
// its buffer only every drainEvery ticks, and an encoder answering the latest summary
// twice, ticks apart. Every summary is encoded when published and again when its reader
// lets it go, far apart in ticks and collections: the bytes must be the same.
func TestHeldSummariesNeverChange(t *testing.T) {
	const n, holdTicks, drainEvery = 20, 40, 50
	ticks := 1500
	if raceEnabled {
		ticks = 300 // nothing is reused: this checks only that the readers do not race
	}
	c := &heldCheck{published: make(map[uint64][]byte)}
	var held []*faultsummary.Summary // owned by the hook (the engine calls it tick after tick)
	hook := Hooks{OnTick: func(s *faultsummary.Summary) {
		c.publish(t, s)
		held = append(held, s)
		if len(held) > holdTicks {
			c.recheck("hook", held[0])
			held[0] = nil
			held = held[1:]
		}
	}}
	e := newEngine(t, Config{Tiers: benchTiers(), History: 4}, reuseModules(n), WithHooks(hook))
	sub := e.Events().Subscribe(2 * drainEvery)
	drain, stop := make(chan struct{}), make(chan struct{})
	subDone, encDone := make(chan struct{}), make(chan struct{})
	go slowSubscriber(c, sub, drain, subDone)
	go latestEncoder(c, e, stop, encDone)

	reused := 0
	for i := range ticks {
		if pooled(e) > 0 {
			reused++ // this tick takes records of a summary nobody holds
		}
		tick(t, e)
		if i%10 == 9 {
			runtime.GC() // the cleanups put the records of unreferenced lines in the pool
		}
		if i%drainEvery == drainEvery-1 {
			drain <- struct{}{}
		}
	}
	close(stop)
	<-encDone
	sub.Close()
	close(drain) // the subscriber reads what is left and returns
	<-subDone

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first != "" {
		t.Fatal(c.first)
	}
	if c.compared < ticks {
		t.Fatalf("%d summaries encoded again, want at least %d", c.compared, ticks)
	}
	if !raceEnabled && reused < ticks/4 {
		t.Fatalf("records reused on %d of %d ticks: too few to prove anything", reused, ticks)
	}
	t.Logf("%d ticks, records reused on %d, %d summaries encoded again", ticks, reused, c.compared)
}
