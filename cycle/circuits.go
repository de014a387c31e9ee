package cycle

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cycled/cycled/breaker"
)

// circuitBook keeps the breakers that are not closed, from their transitions, and the
// summary's lists of them. The lists change only with a transition, so they are built once
// per change and shared, read-only, by the summaries of every tick until the next one: a
// steady state with open breakers costs a tick no copy and no sort.
type circuitBook struct {
	mu     sync.Mutex
	states map[string]breaker.State // guarded by mu; the breakers not closed
	// ver counts the changes of states; it is bumped under mu after the change, so a
	// version read before a tick and found unchanged after it means that no breaker moved
	// in between (every line's state seen at admission is then the snapshot's).
	ver atomic.Uint64

	// The snapshot of states at version snapVer and its sorted lists; guarded by mu.
	built      bool
	snapVer    uint64
	snap       map[string]breaker.State
	open, half []string
}

// moved records transition t.
func (c *circuitBook) moved(t breaker.Transition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states == nil {
		c.states = make(map[string]breaker.State)
	}
	if t.To == breaker.Closed {
		delete(c.states, t.Name)
	} else {
		c.states[t.Name] = t.To
	}
	c.ver.Add(1)
}

// remove forgets the breaker called name: a breaker created again in its place starts
// closed, and no transition of the old one will say so.
func (c *circuitBook) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.states[name]; ok {
		delete(c.states, name)
		c.ver.Add(1)
	}
}

// snapshot returns the version, the breakers not closed (nil if none) and the sorted
// lists of the open and the half-open ones. The map and the lists are shared: read them,
// do not modify them.
func (c *circuitBook) snapshot() (ver uint64, snap map[string]breaker.State, open, half []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ver = c.ver.Load()
	if !c.built || c.snapVer != ver {
		c.built, c.snapVer = true, ver
		c.snap, c.open, c.half = nil, nil, nil
		if len(c.states) > 0 {
			c.snap = maps.Clone(c.states)
		}
		for name, st := range c.snap {
			if st == breaker.Open {
				c.open = append(c.open, name)
			} else {
				c.half = append(c.half, name)
			}
		}
		slices.Sort(c.open)
		slices.Sort(c.half)
	}
	return ver, c.snap, c.open, c.half
}
