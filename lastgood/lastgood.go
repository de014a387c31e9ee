// Package lastgood is the last-known-good store: the latest successful value of every
// blackboard key, with provenance, age and a TTL, so that a failing module can be replaced
// by its last value, tagged stale, until the TTL has passed.
//
// The store is deterministic and never drops a write: it is a map under a lock, bounded by
// the number of keys. It never reads a clock: the time of a write is the Written field of
// the entry and the time of a read is the now passed to Get, so the same sequence of calls
// always gives the same answers, on the wall clock and on a virtual one.
//
// A value read at now has the age now − Written (clamped at zero when now is before
// Written). It is Stale, servable and tagged stale, while age < TTL, and Expired, not to be
// served, once age ≥ TTL: a value whose age is exactly its TTL is expired.
package lastgood

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Quality says whether a stored value may be served.
type Quality uint8

// The qualities.
const (
	// Missing means that no value was ever stored for the key (or it was deleted).
	Missing Quality = iota
	// Stale means that the value is younger than its TTL; it may be served, tagged stale.
	Stale
	// Expired means that the value's age has reached its TTL; it must not be served.
	Expired
)

var qualityNames = [...]string{Missing: "missing", Stale: "stale", Expired: "expired"}

// String returns "missing", "stale" or "expired".
func (q Quality) String() string {
	if int(q) < len(qualityNames) {
		return qualityNames[q]
	}
	return "quality(" + strconv.Itoa(int(q)) + ")"
}

// Defaults of the TTL policy (documented on TTL).
const (
	defaultTTL           = 5 * time.Second       // TTL of keys without a policy
	defaultAutoK         = 3.0                   // multiplier of an automatic TTL
	defaultAutoMin       = 10 * time.Millisecond // lower clamp of an automatic TTL
	defaultAutoMaxFactor = 12                    // upper clamp = this × the store default
	autoAlpha            = 0.2                   // weight of the newest interval in the average
)

// TTL is the time-to-live policy of a key.
//
// The TTL in force for a key is:
//
//   - without a policy (SetTTL never called, or the key was deleted): the store default
//     (WithDefaultTTL, 5s unless set);
//   - with Auto false: Fixed, or the store default when Fixed is not positive;
//   - with Auto true: K × A clamped to [Min, Max], where A is the exponentially weighted
//     moving average of the interval between successive Puts of the key (their Written
//     times): the first interval seeds A, and every later interval x updates it as
//     A ← A + 0.2·(x − A). Intervals that are not positive (two writes at the same instant,
//     or Written going backwards) are not sampled. Until two writes with a positive
//     interval have been seen, the TTL is Fixed, or the store default when Fixed is not
//     positive. K not positive means 3; Min not positive means 10ms; Max not positive means
//     12 × the store default; a Max below Min is raised to Min.
//
// The write history of a key is kept whatever its policy, so a key switched to Auto uses
// the intervals observed before the switch. Delete forgets the history with the policy.
type TTL struct {
	// Fixed is the TTL when Auto is false. Zero means the store's default.
	Fixed time.Duration
	// Auto derives the TTL from the observed interval between successful writes:
	// K × the exponentially weighted moving average of the interval, clamped to [Min, Max].
	// Until two writes have been seen, the TTL is Fixed (or the store default).
	Auto bool
	// K multiplies the average interval. Zero means 3.
	K float64
	// Min and Max clamp an automatic TTL. Zero means: Min 10ms, Max 12 × the store default.
	Min, Max time.Duration
}

// Entry is a stored value with its provenance.
type Entry struct {
	// Key is the blackboard key the value was written to.
	Key string
	// Value is the value the module produced. The store keeps it as given and never copies it.
	Value any
	// Module is the name of the module that produced the value.
	Module string
	// TickID is the tick in which the value was produced.
	TickID uint64
	// Written is when the value was produced: the origin of its age.
	Written time.Time
	// Seq is assigned by Put: unique in the store and strictly increasing for each key
	// (a key deleted and stored again continues above its old numbers). Numbers of
	// different keys are not ordered with respect to each other: concurrent writers of
	// different keys share no counter.
	Seq uint64
}

// Lookup is the answer to Get. When Quality is Missing, Entry is zero except for Key.
type Lookup struct {
	// Entry is the stored value with its provenance.
	Entry
	// Quality says whether the value may be served.
	Quality Quality
	// Age is now − Written, never negative; zero when Missing.
	Age time.Duration
	// TTL is the TTL in force for the key at the time of the lookup.
	TTL time.Duration
}

// Option configures a Store; see WithDefaultTTL.
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithDefaultTTL sets the TTL of keys without their own policy. Default: 5s. A
// non-positive d is ignored.
func WithDefaultTTL(d time.Duration) Option {
	return optionFunc(func(s *Store) { s.defaultTTL.Store(int64(d)) })
}

// Store is the last-known-good store. It is safe for concurrent use. The map of keys has
// one lock; every key's record has its own, so that writers of different keys (the engine
// stores the results of concurrently running modules) do not contend.
type Store struct {
	defaultTTL atomic.Int64 // a time.Duration: see SetDefaultTTL

	mu      sync.RWMutex
	records map[string]*record // guarded by mu
	blocks  atomic.Uint64      // the end of the last block of sequence numbers handed out
	stored  atomic.Int64       // records with a value
}

// record is the state of one key. Its fields are guarded by its own mu, but for st and
// key, set when it is made. A Slot is a record: the engine's writer reaches the state of
// its key in one step, without a handle in between (at thousands of modules, every
// object a module's run touches is a cache miss).
type record struct {
	// On 64-bit platforms a record is 256 bytes, a size class whose objects start on a
	// (64-byte) line: the first line holds the lock and what every write updates, each of
	// the next two one entry slot, and the last what only reads and rare writes touch
	// (the Entry's Key, which a write never changes, is the record's key). A write
	// touches two lines: the first, and the slot it writes. The written fields stay
	// together so that a write touches no more lines than that: in a tick of many trivial
	// modules the writes are most of the work (bench/floor's BenchmarkEngine).
	mu        sync.Mutex
	hasEntry  bool  // guarded by mu; slots[cur] holds the entry
	hasPrev   bool  // guarded by mu; slots[cur^1] holds the entry before it (see GetBefore)
	cur       uint8 // guarded by mu; the slot of the entry
	hasPolicy bool  // guarded by mu
	// marks holds markWritten and markDetached, changed under mu, read also without it
	// (Slot.Unwritten): each is set once in a record's life, so reading them costs a
	// writer nothing.
	marks  atomic.Uint32
	seq    uint64 // guarded by mu; the last Seq assigned
	seqEnd uint64 // guarded by mu; the end of the record's block of sequence numbers
	// Write history for automatic TTLs.
	avg     float64 // guarded by mu; moving average of the write interval, in ns
	samples uint64  // guarded by mu; intervals folded into avg
	module  string  // guarded by mu; the module of both entries: a key has one writer
	// The entry, and the one that the first write of the entry's tick replaced, for the
	// readers of that tick that must not see its writes (GetBefore). A tick's first write
	// goes to the other slot and makes it the entry's, so that it copies nothing.
	slots [2]entrySlot // guarded by mu

	st     *Store // immutable
	key    string // immutable
	policy TTL    // guarded by mu; valid when hasPolicy
}

// entrySlot holds one entry of a record, field by field, on a cache line of its own.
type entrySlot struct {
	value   any
	tick    uint64
	eseq    uint64
	written time.Time
	_       [8]byte
}

// entryLocked returns the entry r holds (valid when hasEntry). The caller holds r.mu.
func (r *record) entryLocked() Entry { return r.slotEntry(&r.slots[r.cur]) }

// slotEntry returns the entry of slot e of r. The caller holds r.mu.
func (r *record) slotEntry(e *entrySlot) Entry {
	return Entry{Key: r.key, Value: e.value, Module: r.module, TickID: e.tick, Written: e.written, Seq: e.eseq}
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{}
	s.defaultTTL.Store(int64(defaultTTL))
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	if s.defaultTTL.Load() <= 0 {
		s.defaultTTL.Store(int64(defaultTTL))
	}
	s.records = make(map[string]*record)
	return s
}

// record returns the record of key, creating it when create is set (else nil if absent).
func (s *Store) record(key string, create bool) *record {
	s.mu.RLock()
	r := s.records[key]
	s.mu.RUnlock()
	if r != nil || !create {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r = s.records[key]; r == nil {
		r = &record{st: s, key: key}
		s.records[key] = r
	}
	return r
}

// SetTTL sets the TTL policy of key. The key need not have a value yet; the policy is
// kept until Delete.
func (s *Store) SetTTL(key string, ttl TTL) {
	r := s.record(key, true)
	r.mu.Lock()
	r.policy = ttl
	r.hasPolicy = true
	r.mu.Unlock()
}

// Put stores e as the last good value of e.Key, assigns its sequence number and returns it.
// The latest Put of a key always wins; e.Written should be the time of the successful
// write, as it is the origin of the value's age and a sample of the key's write interval.
// Put of a key that already has a record allocates nothing.
func (s *Store) Put(e Entry) Entry { return s.Slot(e.Key).Put(e) }

// seqBlock is how many sequence numbers a record takes from the store at a time: writers
// of different keys touch the store-wide counter once per seqBlock writes.
const seqBlock = 64

// nextSeq assigns the next sequence number of r, from its block; a new record or an
// exhausted block takes the next block of the store (above every number handed out
// before). The caller holds r.mu.
func (r *record) nextSeq() uint64 {
	if r.seq == r.seqEnd {
		r.seqEnd = r.st.blocks.Add(seqBlock)
		r.seq = r.seqEnd - seqBlock
	}
	r.seq++
	return r.seq
}

// noteWrite folds a write at written into r's write-interval average (for automatic TTLs)
// and counts a first value. The caller holds r.mu.
func (r *record) noteWrite(written time.Time) {
	if r.hasEntry {
		if x := written.Sub(r.slots[r.cur].written); x > 0 {
			if r.samples == 0 {
				r.avg = float64(x)
			} else {
				r.avg += autoAlpha * (float64(x) - r.avg)
			}
			r.samples++
		}
	} else if m := r.marks.Load(); m&markDetached == 0 {
		r.st.stored.Add(1)
		if m&markWritten == 0 {
			r.marks.Store(m | markWritten)
		}
	} else if m&markWritten == 0 {
		r.marks.Store(m | markWritten)
	}
}

// The marks of a record.
const (
	markWritten  = 1 << iota // an entry was written to it once
	markDetached             // deleted from the store: writes through a Slot are not counted
)

// Get returns the stored value of key with its age and quality at now. It allocates nothing.
func (s *Store) Get(key string, now time.Time) Lookup { return s.GetBefore(key, 0, now) }

// GetBefore is Get as a reader in tick sees key when the writes of tick itself are not for
// it (the blackboard's reader in a tier that runs before, or with, the writer's): the
// entry written last before tick, with its age and quality at now, or Missing if there
// was none (or, for a reader more than a tick late, if it is no longer kept: a record
// keeps the entry and the one before it). Tick 0, before any tick, is Get. It allocates
// nothing.
func (s *Store) GetBefore(key string, tick uint64, now time.Time) Lookup {
	r := s.record(key, false)
	if r == nil {
		return Lookup{Entry: Entry{Key: key}, Quality: Missing, TTL: s.DefaultTTL()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if tick == 0 || !r.hasEntry || r.slots[r.cur].tick < tick {
		return s.getLocked(r, key, now) // (no tick in progress: every entry is from before)
	}
	ttl := s.ttlOf(r)
	prev := &r.slots[r.cur^1]
	if !r.hasPrev || prev.tick >= tick {
		return Lookup{Entry: Entry{Key: key}, Quality: Missing, TTL: ttl}
	}
	return lookupAt(r.slotEntry(prev), ttl, now)
}

// getLocked is get for a caller that holds r.mu.
func (s *Store) getLocked(r *record, key string, now time.Time) Lookup {
	ttl := s.ttlOf(r)
	if !r.hasEntry {
		return Lookup{Entry: Entry{Key: key}, Quality: Missing, TTL: ttl}
	}
	return lookupAt(r.entryLocked(), ttl, now)
}

// lookupAt returns the lookup of e at now under ttl: stale while younger than ttl, then
// expired.
func lookupAt(e Entry, ttl time.Duration, now time.Time) Lookup {
	age := now.Sub(e.Written)
	if age < 0 {
		age = 0
	}
	q := Stale
	if age >= ttl {
		q = Expired
	}
	return Lookup{Entry: e, Quality: q, Age: age, TTL: ttl}
}

// Slot is a handle on one key, for a writer that stores the same key again and again: it
// skips the lookup of the key. A slot outlives a Delete of its key but is then detached
// from the store.
type Slot record

// Slot returns the handle of key, creating its record if needed.
func (s *Store) Slot(key string) *Slot { return (*Slot)(s.record(key, true)) }

// Put is Store.Put for the slot's key (e.Key is set to it).
func (sl *Slot) Put(e Entry) Entry {
	e.Key = sl.key
	e.Seq = sl.PutValue(e.Value, e.Module, e.TickID, e.Written)
	return e
}

// PutValue is Put for the slot's key with only the fields a writer sets, returning the
// sequence number: the engine's path for a module's live value, which copies no Entry.
func (sl *Slot) PutValue(value any, module string, tick uint64, written time.Time) uint64 {
	r := (*record)(sl)
	r.mu.Lock()
	r.noteWrite(written)
	seq := r.nextSeq()
	// Field by field, the module's name only when it changes: a write of the whole entry
	// is a typed copy with a write barrier for each of its pointers while the collector
	// marks, a cost a trivial module's write would notice.
	if r.module != module {
		r.module = module
	}
	e := &r.slots[r.cur]
	if r.hasEntry && e.tick != tick {
		// The first write of a tick goes to the other slot: the entry it replaces stays
		// for that tick's readers that must not see it (GetBefore).
		r.cur ^= 1
		e = &r.slots[r.cur]
		r.hasPrev = true
	}
	e.value, e.tick, e.eseq, e.written = value, tick, seq, written
	r.hasEntry = true
	r.mu.Unlock()
	return seq
}

// Get is Store.Get for the slot's key, without the lookup of the key while the slot is
// attached. A slot detached by a Delete answers what the store holds for the key.
func (sl *Slot) Get(now time.Time) Lookup {
	r := (*record)(sl)
	r.mu.Lock()
	if r.marks.Load()&markDetached != 0 {
		r.mu.Unlock()
		return r.st.Get(r.key, now)
	}
	l := r.st.getLocked(r, r.key, now)
	r.mu.Unlock()
	return l
}

// Unwritten reports whether no entry was ever written to the slot's key and the slot is
// still attached: Get then answers Missing until the next write. It takes no lock, for a
// reader that asks every tick about a key whose writer never succeeded.
func (sl *Slot) Unwritten() bool { return (*record)(sl).marks.Load() == 0 }

// Latest returns the last entry written through the slot or to its key (ok=false: none,
// or the slot is nil). Unlike Get it says nothing of age or TTL.
func (sl *Slot) Latest() (Entry, bool) {
	if sl == nil {
		return Entry{}, false
	}
	r := (*record)(sl)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hasEntry {
		return Entry{}, false
	}
	return r.entryLocked(), true
}

// DefaultTTL returns the TTL of keys without their own policy.
func (s *Store) DefaultTTL() time.Duration { return time.Duration(s.defaultTTL.Load()) }

// SetDefaultTTL changes the TTL of keys without their own policy (and so the upper bound
// of automatic TTLs without a max), from the next lookup on: a value is aged against the
// TTL in force when it is read. A non-positive d is ignored.
func (s *Store) SetDefaultTTL(d time.Duration) {
	if d > 0 {
		s.defaultTTL.Store(int64(d))
	}
}

// ttlOf computes the TTL in force for r. The caller holds r.mu.
func (s *Store) ttlOf(r *record) time.Duration {
	if !r.hasPolicy {
		return s.DefaultTTL()
	}
	p := r.policy
	fixed := p.Fixed
	if fixed <= 0 {
		fixed = s.DefaultTTL()
	}
	if !p.Auto || r.samples == 0 {
		return fixed
	}
	k := p.K
	if !(k > 0) { // also catches NaN
		k = defaultAutoK
	}
	lo, hi := p.Min, p.Max
	if lo <= 0 {
		lo = defaultAutoMin
	}
	if hi <= 0 {
		hi = defaultAutoMaxFactor * s.DefaultTTL()
	}
	if hi < lo {
		hi = lo
	}
	v := k * r.avg
	switch {
	case !(v >= float64(lo)): // also catches NaN
		return lo
	case v >= float64(hi):
		return hi
	default:
		return time.Duration(v)
	}
}

// Delete forgets key, its value, its write history and its TTL policy.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	r := s.records[key]
	delete(s.records, key)
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.hasEntry {
		s.stored.Add(-1)
		r.hasEntry = false
	}
	r.hasPrev = false
	r.marks.Store(r.marks.Load() | markDetached)
	r.mu.Unlock()
}

// Len returns the number of stored keys: keys with a value (a TTL policy alone does not count).
func (s *Store) Len() int { return int(s.stored.Load()) }

// Keys returns the stored keys, sorted.
func (s *Store) Keys() []string {
	s.mu.RLock()
	recs := make([]*record, 0, len(s.records))
	keys := make([]string, 0, len(s.records))
	for k, r := range s.records {
		recs = append(recs, r)
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	out := make([]string, 0, len(keys))
	for i, r := range recs {
		r.mu.Lock()
		if r.hasEntry {
			out = append(out, keys[i])
		}
		r.mu.Unlock()
	}
	slices.Sort(out)
	return out
}
