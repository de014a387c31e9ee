// Package blackboard is the per-tick board through which modules exchange values.
//
// Every entry carries its provenance (key, source module, tick, sequence number, written
// time) and its quality: live (written this tick), last_good (a last-known-good value served
// in place of a module that produced nothing, tagged stale, with its age) or none (nothing
// may be served; expired when a value existed but outlived its TTL). A live value whose
// module read any stale input in that tick is tagged derived_from_stale, and the tag
// propagates through later readers.
//
// The engine writes a tier's results only after the tier has finished, so readers in tier k
// see the live values of tiers < k of this tick and tagged fallbacks for the rest; a reader
// never sees a half-written tier.
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
	// Age is how old the value is at the tick's start (zero for live values).
	Age time.Duration
	// DerivedFromStale reports a live value whose module read a stale or expired input (or
	// one itself derived from stale data) in this tick.
	DerivedFromStale bool
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

// Slot is one key of the board.
type Slot struct {
	mu   sync.Mutex // not an RWMutex: one writer per tick and few readers, and Lock is cheaper
	e    Entry      // guarded by mu; e.Key is the slot's key from the start (immutable)
	tick uint64     // guarded by mu; the tick e was written in (0: never)
	tier int        // guarded by mu; the writer's tier; -1: visible to every reader
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
	sl.mu.Unlock()
}

// SetLive is Set for a live value (Source Live, not stale), writing the fields in place:
// the engine's path for a module that succeeded.
func (b *Board) SetLive(sl *Slot, writerTier int, value any, module string, tick, seq uint64, written time.Time, derivedFromStale bool) {
	id := b.cur.Load().id
	sl.mu.Lock()
	sl.e = Entry{Key: sl.e.Key, Value: value, Module: module, TickID: tick, Seq: seq, Written: written,
		Source: Live, DerivedFromStale: derivedFromStale}
	sl.tick, sl.tier = id, writerTier
	sl.mu.Unlock()
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
		sl.mu.Lock()
		e, tick, tier := sl.e, sl.tick, sl.tier
		sl.mu.Unlock()
		if tick == cur.id && tick != 0 && tier < readerTier {
			return e, true
		}
	}
	if b.lg == nil {
		return Entry{}, false
	}
	return FromLastGood(b.lg.Get(key, cur.start))
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
		sl.mu.Lock()
		if sl.tick == cur.id && sl.tick != 0 {
			out = append(out, sl.e)
		}
		sl.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
