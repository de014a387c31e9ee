// Package blackboard is the per-tick board through which modules exchange values.
//
// Every entry carries its provenance (key, source module, tick, sequence number, written
// time) and its quality: live (written this tick), last_good (a last-known-good value served
// in place of a module that produced nothing, tagged stale, with its age) or none (nothing
// may be served; expired when a value existed but outlived its TTL). A live value whose
// module read any stale input in that tick is tagged derived_from_stale, and the tag
// propagates through later readers.
//
// The engine writes a module's value as soon as the module succeeds, marked with the
// writer's tier. Readers in tier k see the live values of tiers < k of this tick, and for
// every other key the last-known-good value from before the tick, tagged (lastgood's
// GetBefore): what a reader sees never depends on which module of a tier finishes first.
package blackboard

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cycled/cycled/lastgood"
)

// Source says where an entry's value comes from.
type Source uint8

// The sources.
const (
	// None: nothing is served for the key.
	None Source = iota
	// Live: written by its module in this tick.
	Live
	// LastGood: the module's last-known-good value, served stale.
	LastGood
)

var sourceNames = [...]string{"none", "live", "last_good"}

// String returns "none", "live" or "last_good".
func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// MarshalText encodes s as its name.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a source name.
func (s *Source) UnmarshalText(b []byte) error {
	for i, n := range sourceNames {
		if n == string(b) {
			*s = Source(i)
			return nil
		}
	}
	return fmt.Errorf("unknown source %q", b)
}

// Entry is one value on the board with its provenance and quality.
type Entry struct {
	// Key is the blackboard key.
	Key string
	// Value is the value; nil when Source is None.
	Value any
	// Module is the module that wrote the value.
	Module string
	// TickID is the tick in which the value was written.
	TickID uint64
	// Seq is the last-known-good store's sequence number of the value (0 for none).
	Seq uint64
	// Written is when the value was written.
	Written time.Time
	// Source says where the value comes from.
	Source Source
	// Stale reports a last-known-good value served in place of a fresh one.
	Stale bool
	// Expired reports that a value existed but outlived its TTL: nothing is served.
	Expired bool
	// DerivedFromStale reports a live value whose module read a stale or expired input (or
	// one itself derived from stale data) in this tick.
	DerivedFromStale bool
	// Age is how old the value is at the tick's start (zero for live values).
	Age time.Duration
}

// Degraded reports whether a reader should treat the entry as not fresh.
func (e Entry) Degraded() bool { return e.Source != Live || e.Stale || e.Expired || e.DerivedFromStale }

type entryJSON struct {
	Key              string     `json:"key"`
	Value            any        `json:"value"`
	Module           string     `json:"module,omitempty"`
	TickID           uint64     `json:"tick_id,omitempty"`
	Seq              uint64     `json:"seq,omitempty"`
	Written          *time.Time `json:"written_at,omitempty"`
	Source           Source     `json:"source"`
	Stale            bool       `json:"stale"`
	Expired          bool       `json:"expired"`
	AgeMs            float64    `json:"age_ms"`
	DerivedFromStale bool       `json:"derived_from_stale"`
}

// MarshalJSON encodes the entry with snake_case names and the age in milliseconds.
func (e Entry) MarshalJSON() ([]byte, error) {
	j := entryJSON{Key: e.Key, Value: e.Value, Module: e.Module, TickID: e.TickID, Seq: e.Seq,
		Source: e.Source, Stale: e.Stale, Expired: e.Expired, AgeMs: Millis(e.Age), DerivedFromStale: e.DerivedFromStale}
	if !e.Written.IsZero() {
		w := e.Written
		j.Written = &w
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes. The age is rounded to the nearest
// nanosecond: ms·1e6 in floating point can land just below the integer it encodes.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Entry{Key: j.Key, Value: j.Value, Module: j.Module, TickID: j.TickID, Seq: j.Seq, Source: j.Source,
		Stale: j.Stale, Expired: j.Expired, Age: time.Duration(math.Round(j.AgeMs * float64(time.Millisecond))), DerivedFromStale: j.DerivedFromStale}
	if j.Written != nil {
		e.Written = *j.Written
	}
	return nil
}

// Millis converts d to floating-point milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// FromLastGood turns a last-known-good lookup into the entry served in place of a fresh
// value: last_good and stale while younger than its TTL, none and expired after, and
// ok=false when the key never had a value.
func FromLastGood(l lastgood.Lookup) (Entry, bool) {
	switch l.Quality {
	case lastgood.Stale:
		return Entry{Key: l.Key, Value: l.Value, Module: l.Module, TickID: l.TickID, Seq: l.Seq, Written: l.Written,
			Source: LastGood, Stale: true, Age: l.Age}, true
	case lastgood.Expired:
		return Entry{Key: l.Key, Module: l.Module, TickID: l.TickID, Seq: l.Seq, Written: l.Written,
			Source: None, Expired: true, Age: l.Age}, true
	default:
		return Entry{}, false
	}
}

// Board holds the entries of the tick in progress. Keys not written yet this tick are
// answered from the last-known-good store, tagged. It is safe for concurrent use: the
// engine writes while modules read (and abandoned modules may still read).
//
// Each key has a Slot; a writer that owns a key writes through its slot without touching
// the board's map, so that concurrently finishing modules do not contend.
type Board struct {
	lg  *lastgood.Store
	cur atomic.Pointer[tickInfo]

	mu    sync.RWMutex
	slots map[string]*Slot // guarded by mu
}

type tickInfo struct {
	id    uint64
	start time.Time
}

// Slot is one key of the board. It holds either an entry written with Set, or a mark that
// the key's module wrote a live value this tick (SetLive), whose value and provenance are
// then read from the key's last-known-good record: the engine stores a module's value
// once, not once for the board and once for last-known-good (at thousands of modules a
// second copy was a second lock and a second object touched per module and tick).
type Slot struct {
	live atomic.Uint64                 // liveMark of the last SetLive; 0: none (cleared by Set)
	from atomic.Pointer[lastgood.Slot] // the record the live value was written to

	mu   sync.Mutex // not an RWMutex: one writer per tick and few readers, and Lock is cheaper
	e    Entry      // guarded by mu; e.Key is the slot's key from the start (immutable)
	tick uint64     // guarded by mu; the tick e was written in (0: never)
	tier int        // guarded by mu; the writer's tier; -1: visible to every reader
}

// liveMark packs a live write's tick (48 bits), the writer's tier and its
// derived_from_stale flag.
func liveMark(tick uint64, tier int, derived bool) uint64 {
	t := uint64(min(max(tier+1, 0), 0x7fff)) // tier -1 (every reader) is 0; 32 766 tiers at most
	m := tick<<16 | t<<1
	if derived {
		m |= 1
	}
	return m
}

// liveMarked reports whether m marks a live write of tick id.
func liveMarked(m, id uint64) bool { return m != 0 && m>>16 == id }

// liveEntry returns the entry of a live write of tick id, marked m (liveMarked), if it is
// visible to a reader of readerTier and its record still holds it (a record deleted or
// rewritten since holds another write: the reader then gets what the store serves).
func (sl *Slot) liveEntry(m, id uint64, readerTier int) (Entry, bool) {
	if int(m>>1&0x7fff)-1 >= readerTier {
		return Entry{}, false
	}
	le, ok := sl.from.Load().Latest()
	if !ok || le.TickID != id {
		return Entry{}, false
	}
	return Entry{Key: le.Key, Value: le.Value, Module: le.Module, TickID: le.TickID, Seq: le.Seq, Written: le.Written,
		Source: Live, DerivedFromStale: m&1 != 0}, true
}

// New returns an empty board that falls back to lg.
func New(lg *lastgood.Store) *Board {
	b := &Board{lg: lg, slots: make(map[string]*Slot)}
	b.cur.Store(&tickInfo{})
	return b
}

// Begin starts tick id at start: the previous tick's entries are no longer visible.
func (b *Board) Begin(id uint64, start time.Time) { b.cur.Store(&tickInfo{id: id, start: start}) }

// Tick returns the tick in progress.
func (b *Board) Tick() uint64 { return b.cur.Load().id }

// Slot returns the slot of key, creating it if needed.
func (b *Board) Slot(key string) *Slot {
	b.mu.RLock()
	sl := b.slots[key]
	b.mu.RUnlock()
	if sl != nil {
		return sl
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if sl = b.slots[key]; sl == nil {
		sl = &Slot{e: Entry{Key: key}}
		b.slots[key] = sl
	}
	return sl
}

// Remove forgets key's slot.
func (b *Board) Remove(key string) {
	b.mu.Lock()
	delete(b.slots, key)
	b.mu.Unlock()
}

// Set writes e (its key is the slot's) for the tick in progress, as written by a module of
// tier writerTier: readers of later tiers see it, readers of the same or earlier tiers
// still see the fallback. writerTier -1 makes it visible to every reader.
func (b *Board) Set(sl *Slot, writerTier int, e Entry) {
	id := b.cur.Load().id
	sl.mu.Lock()
	e.Key = sl.e.Key
	sl.e, sl.tick, sl.tier = e, id, writerTier
	if sl.live.Load() != 0 { // a key written only by Set (a module refused tick after tick) has none to clear
		sl.live.Store(0)
	}
	sl.mu.Unlock()
}

// SetLive marks the slot's key as written live this tick by a module of tier writerTier
// (visibility as Set): the value is the one just stored in from, the key's last-known-good
// record (lastgood.Slot.PutValue), which readers read it from, with Source Live and
// derivedFromStale. It takes no lock: the engine's path for a module that succeeded. The
// entry is visible for as long as from holds that write (a later write to from, or a
// Delete of its key, replaces it; the tick ends first in the engine).
func (b *Board) SetLive(sl *Slot, from *lastgood.Slot, writerTier int, derivedFromStale bool) {
	if sl.from.Load() != from {
		sl.from.Store(from)
	}
	sl.live.Store(liveMark(b.cur.Load().id, writerTier, derivedFromStale))
}

// Put writes entries for the tick in progress, visible to every reader.
func (b *Board) Put(es ...Entry) {
	for _, e := range es {
		b.Set(b.Slot(e.Key), -1, e)
	}
}

// Get returns the entry of key as a reader outside the tiers sees it now: this tick's entry
// if one was written, else the last-known-good value tagged stale (or none/expired), else
// ok=false.
func (b *Board) Get(key string) (Entry, bool) { return b.GetFor(key, math.MaxInt) }

// GetFor is Get for a reader in tier readerTier: entries written this tick by tiers that
// do not run before readerTier are answered from the last-known-good store instead.
func (b *Board) GetFor(key string, readerTier int) (Entry, bool) {
	cur := b.cur.Load()
	b.mu.RLock()
	sl := b.slots[key]
	b.mu.RUnlock()
	if sl != nil {
		if m := sl.live.Load(); liveMarked(m, cur.id) {
			if e, ok := sl.liveEntry(m, cur.id, readerTier); ok {
				return e, true
			}
		} else {
			sl.mu.Lock()
			e, tick, tier := sl.e, sl.tick, sl.tier
			sl.mu.Unlock()
			if tick == cur.id && tick != 0 && tier < readerTier {
				return e, true
			}
		}
	}
	if b.lg == nil {
		return Entry{}, false
	}
	// Not this tick's entry for this reader: the last-known-good value from before the
	// tick, also when a module of this tier, or of a later one, already wrote this tick's.
	return FromLastGood(b.lg.GetBefore(key, cur.id, cur.start))
}

// Entries returns a copy of this tick's entries, sorted by key.
func (b *Board) Entries() []Entry {
	cur := b.cur.Load()
	b.mu.RLock()
	slots := make([]*Slot, 0, len(b.slots))
	for _, sl := range b.slots {
		slots = append(slots, sl)
	}
	b.mu.RUnlock()
	out := make([]Entry, 0, len(slots))
	for _, sl := range slots {
		if m := sl.live.Load(); liveMarked(m, cur.id) {
			if e, ok := sl.liveEntry(m, cur.id, math.MaxInt); ok {
				out = append(out, e)
			}
			continue
		}
		sl.mu.Lock()
		if sl.tick == cur.id && sl.tick != 0 {
			out = append(out, sl.e)
		}
		sl.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
