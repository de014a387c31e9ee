// Package lastgood is the last-known-good store: the latest successful value of every
// blackboard key, with provenance, age and a TTL, so that a failing module can be replaced
// by its last value, tagged stale, until the TTL has passed.
//
// The store is deterministic and never drops a write: it is a map under a lock, bounded by
// the number of keys.
package lastgood

import (
	"time"
)

// Quality says whether a stored value may be served.
type Quality uint8

// The qualities.
const (
	// Missing: no value was ever stored for the key.
	Missing Quality = iota
	// Stale: a value younger than its TTL; it may be served, tagged stale.
	Stale
	// Expired: the value is older than its TTL; it must not be served.
	Expired
)

// String returns "missing", "stale" or "expired".
func (q Quality) String() string { panic("todo") }

// TTL is the time-to-live policy of a key.
type TTL struct {
	// Fixed is the TTL when Auto is false. Zero means the store's default.
	Fixed time.Duration
	// Auto derives the TTL from the observed interval between successful writes:
	// K × the exponentially weighted moving average of the interval, clamped to [Min, Max].
	// Until two writes have been seen, the TTL is Fixed (or the store default).
	Auto bool
	// K multiplies the average interval. Zero means 3.
	K float64
	// Min and Max clamp an automatic TTL. Zero means 10ms and the store default × 12.
	Min, Max time.Duration
}

// Entry is a stored value with its provenance.
type Entry struct {
	Key     string
	Value   any
	Module  string
	TickID  uint64
	Written time.Time
	Seq     uint64 // assigned by Put: strictly increasing per store
}

// Lookup is the answer to Get.
type Lookup struct {
	Entry
	Quality Quality
	Age     time.Duration // now − Written; zero when Missing
	TTL     time.Duration // the TTL in force for the key
}

// Option configures a Store.
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithDefaultTTL sets the TTL of keys without their own policy. Default: 5s.
func WithDefaultTTL(d time.Duration) Option { return optionFunc(func(s *Store) { s.defaultTTL = d }) }

// Store is the last-known-good store. It is safe for concurrent use.
type Store struct {
	defaultTTL time.Duration
}

// New returns an empty store.
func New(opts ...Option) *Store { panic("todo") }

// SetTTL sets the TTL policy of key.
func (s *Store) SetTTL(key string, ttl TTL) { panic("todo") }

// Put stores e as the last good value of e.Key, assigns its sequence number and returns it.
func (s *Store) Put(e Entry) Entry { panic("todo") }

// Get returns the stored value of key with its age and quality at now.
func (s *Store) Get(key string, now time.Time) Lookup { panic("todo") }

// Delete forgets key and its TTL policy.
func (s *Store) Delete(key string) { panic("todo") }

// Len returns the number of stored keys.
func (s *Store) Len() int { panic("todo") }

// Keys returns the stored keys, sorted.
func (s *Store) Keys() []string { panic("todo") }
