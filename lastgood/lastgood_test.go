package lastgood

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// t0 is an arbitrary fixed origin: the store never reads a clock, so no test needs one.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestQualityString(t *testing.T) {
	for q, want := range map[Quality]string{Missing: "missing", Stale: "stale", Expired: "expired", Quality(9): "quality(9)"} {
		if got := q.String(); got != want {
			t.Errorf("Quality(%d).String() = %q, want %q", uint8(q), got, want)
		}
	}
}

func TestGetQualityAgeBoundaries(t *testing.T) {
	const ttl = 100 * time.Millisecond
	tests := []struct {
		name    string
		put     bool
		now     time.Duration // relative to the write at t0
		quality Quality
		age     time.Duration
	}{
		{name: "never stored", put: false, now: 0, quality: Missing, age: 0},
		{name: "read at write time", put: true, now: 0, quality: Stale, age: 0},
		{name: "read before write time clamps age", put: true, now: -time.Second, quality: Stale, age: 0},
		{name: "young", put: true, now: 30 * time.Millisecond, quality: Stale, age: 30 * time.Millisecond},
		{name: "one ns before TTL", put: true, now: ttl - 1, quality: Stale, age: ttl - 1},
		{name: "age exactly TTL", put: true, now: ttl, quality: Expired, age: ttl},
		{name: "one ns past TTL", put: true, now: ttl + 1, quality: Expired, age: ttl + 1},
		{name: "long past TTL", put: true, now: time.Hour, quality: Expired, age: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			s.SetTTL("k", TTL{Fixed: ttl})
			var put Entry
			if tt.put {
				put = s.Put(Entry{Key: "k", Value: 7, Module: "m", TickID: 3, Written: t0})
			}
			got := s.Get("k", at(tt.now))
			if got.Quality != tt.quality || got.Age != tt.age || got.TTL != ttl {
				t.Fatalf("Get = {Quality: %v, Age: %v, TTL: %v}, want {%v, %v, %v}", got.Quality, got.Age, got.TTL, tt.quality, tt.age, ttl)
			}
			if got.Key != "k" {
				t.Errorf("Key = %q, want k", got.Key)
			}
			if tt.put && got.Entry != put {
				t.Errorf("Entry = %+v, want the stored %+v", got.Entry, put)
			}
			if !tt.put && (got.Entry != Entry{Key: "k"}) {
				t.Errorf("Entry of a missing key = %+v, want zero except Key", got.Entry)
			}
		})
	}
}

func TestTTLResolution(t *testing.T) {
	tests := []struct {
		name   string
		opts   []Option
		policy *TTL // nil: no SetTTL
		want   time.Duration
	}{
		{name: "store default", want: 5 * time.Second},
		{name: "custom default", opts: []Option{WithDefaultTTL(time.Second)}, want: time.Second},
		{name: "non-positive default ignored", opts: []Option{WithDefaultTTL(0)}, want: 5 * time.Second},
		{name: "negative default ignored", opts: []Option{WithDefaultTTL(-time.Second)}, want: 5 * time.Second},
		{name: "fixed", policy: &TTL{Fixed: 250 * time.Millisecond}, want: 250 * time.Millisecond},
		{name: "fixed zero means default", opts: []Option{WithDefaultTTL(2 * time.Second)}, policy: &TTL{}, want: 2 * time.Second},
		{name: "auto without writes is fixed", policy: &TTL{Auto: true, Fixed: time.Second}, want: time.Second},
		{name: "auto without writes and no fixed is default", policy: &TTL{Auto: true}, want: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.opts...)
			if tt.policy != nil {
				s.SetTTL("k", *tt.policy)
			}
			if got := s.Get("k", t0).TTL; got != tt.want {
				t.Errorf("TTL before any write = %v, want %v", got, tt.want)
			}
			s.Put(Entry{Key: "k", Written: t0})
			if got := s.Get("k", t0).TTL; got != tt.want {
				t.Errorf("TTL after one write = %v, want %v", got, tt.want)
			}
		})
	}
}

// putEvery writes key n times, step apart, starting at t0, and returns the last write time.
func putEvery(s *Store, key string, n int, step time.Duration) time.Time {
	var w time.Time
	for i := range n {
		w = at(time.Duration(i) * step)
		s.Put(Entry{Key: key, Written: w})
	}
	return w
}

// TestSetDefaultTTL: the default TTL applies at lookup, so a change reaches values stored
// before it; a non-positive one is ignored.
func TestSetDefaultTTL(t *testing.T) {
	s := New(WithDefaultTTL(5 * time.Second))
	s.Put(Entry{Key: "k", Value: 1, Written: at(0)})
	if q := s.Get("k", at(2*time.Second)).Quality; q != Stale {
		t.Fatalf("2 s old under 5 s: %v", q)
	}
	s.SetDefaultTTL(time.Second)
	s.SetDefaultTTL(0)
	s.SetDefaultTTL(-time.Second)
	if lk := s.Get("k", at(2*time.Second)); lk.Quality != Expired || lk.TTL != time.Second || s.DefaultTTL() != time.Second {
		t.Fatalf("2 s old under 1 s: %+v (default %v)", lk, s.DefaultTTL())
	}
}

func TestAutoTTL(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		opts   []Option
		policy TTL
		writes []time.Duration // Written offsets from t0, in order
		want   time.Duration
	}{
		{name: "one write: fixed", policy: TTL{Auto: true, Fixed: 40 * ms}, writes: []time.Duration{0}, want: 40 * ms},
		{name: "one write: default", policy: TTL{Auto: true}, writes: []time.Duration{0}, want: 5 * time.Second},
		{name: "first interval seeds the average", policy: TTL{Auto: true}, writes: []time.Duration{0, 100 * ms}, want: 300 * ms},
		{name: "steady interval", policy: TTL{Auto: true}, writes: []time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 400 * ms}, want: 300 * ms},
		// avg: 100 → 100 + 0.2·(200−100) = 120 → ×3 = 360ms.
		{name: "ewma alpha 0.2", policy: TTL{Auto: true}, writes: []time.Duration{0, 100 * ms, 300 * ms}, want: 360 * ms},
		// avg: 100 → 120 → 120 + 0.2·(50−120) = 106 → ×3 = 318ms.
		{name: "ewma three samples", policy: TTL{Auto: true}, writes: []time.Duration{0, 100 * ms, 300 * ms, 350 * ms}, want: 318 * ms},
		{name: "custom K", policy: TTL{Auto: true, K: 2}, writes: []time.Duration{0, 100 * ms}, want: 200 * ms},
		{name: "negative K means 3", policy: TTL{Auto: true, K: -1}, writes: []time.Duration{0, 100 * ms}, want: 300 * ms},
		{name: "NaN K means 3", policy: TTL{Auto: true, K: math.NaN()}, writes: []time.Duration{0, 100 * ms}, want: 300 * ms},
		{name: "default min clamp 10ms", policy: TTL{Auto: true}, writes: []time.Duration{0, 1 * ms}, want: 10 * ms},
		{name: "custom min clamp", policy: TTL{Auto: true, Min: 50 * ms}, writes: []time.Duration{0, 10 * ms}, want: 50 * ms},
		{name: "default max clamp 12x default", policy: TTL{Auto: true}, writes: []time.Duration{0, time.Hour}, want: 60 * time.Second},
		{name: "default max follows store default", opts: []Option{WithDefaultTTL(time.Second)}, policy: TTL{Auto: true}, writes: []time.Duration{0, time.Hour}, want: 12 * time.Second},
		{name: "custom max clamp", policy: TTL{Auto: true, Max: 200 * ms}, writes: []time.Duration{0, 100 * ms}, want: 200 * ms},
		{name: "max below min is raised to min", policy: TTL{Auto: true, Min: 500 * ms, Max: 100 * ms}, writes: []time.Duration{0, 10 * time.Second}, want: 500 * ms},
		{name: "infinite K clamps to max", policy: TTL{Auto: true, K: math.Inf(1)}, writes: []time.Duration{0, 100 * ms}, want: 60 * time.Second},
		{name: "same-instant writes are not sampled", policy: TTL{Auto: true, Fixed: 40 * ms}, writes: []time.Duration{0, 0, 0}, want: 40 * ms},
		{name: "backwards writes are not sampled", policy: TTL{Auto: true}, writes: []time.Duration{0, 100 * ms, 50 * ms, 150 * ms}, want: 300 * ms},
		{name: "fixed policy ignores history", policy: TTL{Fixed: 70 * ms}, writes: []time.Duration{0, 100 * ms, 200 * ms}, want: 70 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.opts...)
			s.SetTTL("k", tt.policy)
			for _, w := range tt.writes {
				s.Put(Entry{Key: "k", Written: at(w)})
			}
			if got := s.Get("k", at(tt.writes[len(tt.writes)-1])).TTL; got != tt.want {
				t.Errorf("TTL = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAutoTTLAdapts(t *testing.T) {
	s := New()
	s.SetTTL("k", TTL{Auto: true})
	last := putEvery(s, "k", 5, 100*time.Millisecond)
	if got := s.Get("k", last).TTL; got != 300*time.Millisecond {
		t.Fatalf("TTL at 100ms cadence = %v, want 300ms", got)
	}
	// The writer slows down to one write a second: the TTL grows monotonically toward 3s
	// and never overshoots it.
	prev := s.Get("k", last).TTL
	for i := 1; i <= 40; i++ {
		last = last.Add(time.Second)
		s.Put(Entry{Key: "k", Written: last})
		got := s.Get("k", last).TTL
		if got <= prev || got > 3*time.Second {
			t.Fatalf("write %d: TTL %v after %v, want increasing toward 3s", i, got, prev)
		}
		prev = got
	}
	if prev < 2990*time.Millisecond {
		t.Errorf("TTL after 40 slow writes = %v, want ≈3s", prev)
	}
	// A value written at the new cadence is stale just before 3s and expired at the TTL.
	lk := s.Get("k", last.Add(prev-1))
	if lk.Quality != Stale {
		t.Errorf("quality just before the auto TTL = %v, want stale", lk.Quality)
	}
	if lk := s.Get("k", last.Add(prev)); lk.Quality != Expired {
		t.Errorf("quality at the auto TTL = %v, want expired", lk.Quality)
	}
}

func TestAutoTTLKeepsHistoryAcrossPolicyChange(t *testing.T) {
	s := New()
	last := putEvery(s, "k", 3, 50*time.Millisecond) // no policy yet: default TTL
	if got := s.Get("k", last).TTL; got != 5*time.Second {
		t.Fatalf("TTL without policy = %v, want 5s", got)
	}
	s.SetTTL("k", TTL{Auto: true})
	if got := s.Get("k", last).TTL; got != 150*time.Millisecond {
		t.Fatalf("TTL after switching to auto = %v, want 150ms", got)
	}
	s.SetTTL("k", TTL{Fixed: time.Second})
	if got := s.Get("k", last).TTL; got != time.Second {
		t.Fatalf("TTL after switching back to fixed = %v, want 1s", got)
	}
}

func TestPutReturnsStoredEntryAndOverwrites(t *testing.T) {
	s := New()
	e1 := s.Put(Entry{Key: "k", Value: "a", Module: "m1", TickID: 1, Written: at(0), Seq: 999})
	if e1.Seq == 0 || e1.Seq == 999 {
		t.Fatalf("first Seq = %d, want one assigned by the store (a caller's Seq is ignored)", e1.Seq)
	}
	want := Entry{Key: "k", Value: "a", Module: "m1", TickID: 1, Written: at(0), Seq: e1.Seq}
	if e1 != want {
		t.Fatalf("Put returned %+v, want %+v", e1, want)
	}
	e2 := s.Put(Entry{Key: "k", Value: "b", Module: "m2", TickID: 2, Written: at(time.Millisecond)})
	got := s.Get("k", at(time.Millisecond))
	if got.Entry != e2 || got.Value != "b" || got.Module != "m2" || got.TickID != 2 {
		t.Fatalf("Get after overwrite = %+v, want %+v", got.Entry, e2)
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
}

func TestSeqUniqueAndIncreasingPerKey(t *testing.T) {
	s := New()
	last := map[string]uint64{}
	seen := map[uint64]string{}
	for i := range 1000 {
		key := "k" + strconv.Itoa(i%7)
		e := s.Put(Entry{Key: key, Written: at(time.Duration(i))})
		if e.Seq <= last[key] {
			t.Fatalf("Put %d: Seq %d of %s not above its previous %d", i, e.Seq, key, last[key])
		}
		if k, dup := seen[e.Seq]; dup {
			t.Fatalf("Seq %d given to %s and %s", e.Seq, k, key)
		}
		last[key], seen[e.Seq] = e.Seq, key
		if got := s.Get(key, at(0)).Seq; got != e.Seq {
			t.Fatalf("Get Seq = %d, want %d", got, e.Seq)
		}
	}
	// Deleting a key does not reuse sequence numbers: it continues above every number
	// handed out before.
	var maxSeq uint64
	for q := range seen {
		maxSeq = max(maxSeq, q)
	}
	s.Delete("k0")
	if e := s.Put(Entry{Key: "k0"}); e.Seq <= maxSeq {
		t.Fatalf("Seq after Delete = %d, want above %d", e.Seq, maxSeq)
	}
}

// A key that exhausts its block of sequence numbers moves on to a new block above every
// other: its numbers keep increasing and stay unique.
func TestSeqBlockRollover(t *testing.T) {
	s := New()
	a, b := s.Slot("a"), s.Slot("b")
	first := a.PutValue(1, "m", 1, at(0))
	other := b.PutValue(1, "m", 1, at(0))
	for range seqBlock - 1 {
		a.PutValue(1, "m", 1, at(0))
	}
	next := a.PutValue(2, "m", 2, at(time.Millisecond)) // the first of a's second block
	if next <= first || next <= other || next <= first+seqBlock-1 {
		t.Fatalf("after its block filled, a got %d (first %d, b's %d): want a new block above both", next, first, other)
	}
}

func TestDeleteLenKeys(t *testing.T) {
	s := New()
	if s.Len() != 0 || len(s.Keys()) != 0 {
		t.Fatalf("new store: Len %d, Keys %v", s.Len(), s.Keys())
	}
	for _, k := range []string{"zeta", "alpha", "mid"} {
		s.Put(Entry{Key: k, Written: t0})
	}
	s.SetTTL("policy-only", TTL{Fixed: time.Second}) // a policy alone is not a stored key
	if got, want := s.Keys(), []string{"alpha", "mid", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("Keys = %v, want %v", got, want)
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	if lk := s.Get("policy-only", t0); lk.Quality != Missing || lk.TTL != time.Second {
		t.Fatalf("policy-only key: %v TTL %v, want missing with its own TTL 1s", lk.Quality, lk.TTL)
	}

	s.SetTTL("mid", TTL{Fixed: time.Second})
	s.Delete("mid")
	s.Delete("mid")     // deleting twice is harmless
	s.Delete("unknown") // deleting an unknown key is harmless
	if got, want := s.Keys(), []string{"alpha", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("Keys after Delete = %v, want %v", got, want)
	}
	if s.Len() != 2 {
		t.Fatalf("Len after Delete = %d, want 2", s.Len())
	}
	lk := s.Get("mid", t0)
	if lk.Quality != Missing || lk.Age != 0 || lk.TTL != 5*time.Second || lk.Value != nil {
		t.Fatalf("Get after Delete = %+v, want missing with the default TTL (policy forgotten)", lk)
	}
	// Delete forgets the write history too: one new write does not give an auto TTL.
	s.SetTTL("alpha", TTL{Auto: true})
	s.Put(Entry{Key: "alpha", Written: at(100 * time.Millisecond)})
	if got := s.Get("alpha", t0).TTL; got != 300*time.Millisecond {
		t.Fatalf("auto TTL before Delete = %v, want 300ms", got)
	}
	s.Delete("alpha")
	s.SetTTL("alpha", TTL{Auto: true})
	s.Put(Entry{Key: "alpha", Written: at(time.Second)})
	if got := s.Get("alpha", t0).TTL; got != 5*time.Second {
		t.Fatalf("auto TTL after Delete and one write = %v, want the 5s default", got)
	}
	s.Delete("policy-only")
	if s.Len() != 2 {
		t.Fatalf("Len after deleting a policy-only key = %d, want 2", s.Len())
	}
}

func TestKeysIsACopy(t *testing.T) {
	s := New()
	s.Put(Entry{Key: "a"})
	ks := s.Keys()
	ks[0] = "mutated"
	if got := s.Keys(); got[0] != "a" {
		t.Fatalf("Keys = %v after mutating an earlier result", got)
	}
}

func TestConcurrentPutGet(t *testing.T) {
	s := New()
	const writers, readers, perWriter = 4, 4, 500
	keys := []string{"a", "b", "c"}
	for _, k := range keys {
		s.SetTTL(k, TTL{Auto: true})
	}
	var wg sync.WaitGroup
	seqs := make([][]uint64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				e := s.Put(Entry{Key: keys[i%len(keys)], Value: w, TickID: uint64(i), Written: at(time.Duration(i) * time.Millisecond)})
				seqs[w] = append(seqs[w], e.Seq)
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for i := range perWriter {
				lk := s.Get(keys[i%len(keys)], at(time.Duration(i)*time.Millisecond))
				if lk.Quality == Expired && lk.Age < lk.TTL {
					t.Errorf("inconsistent lookup %+v", lk)
					return
				}
				_ = s.Len()
				_ = s.Keys()
			}
		})
	}
	wg.Go(func() {
		for range perWriter {
			s.SetTTL("d", TTL{Fixed: time.Second})
			s.Put(Entry{Key: "d"})
			s.Delete("d")
		}
	})
	wg.Wait()

	// Every Put got a distinct sequence number, increasing within each writer's key.
	all := map[uint64]bool{}
	for w, ss := range seqs {
		for i, q := range ss {
			if i >= len(keys) && q <= ss[i-len(keys)] {
				t.Fatalf("writer %d: Seq %d of key %q after %d", w, q, keys[i%len(keys)], ss[i-len(keys)])
			}
			if all[q] {
				t.Fatalf("Seq %d assigned twice", q)
			}
			all[q] = true
		}
	}
	if s.Len() != len(keys) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(keys))
	}
}

// TestGetBefore: a reader of tick t that must not see t's writes gets the entry written
// last before t: the one the first write of t replaced (a second write in t keeps it),
// aged at now; nothing if the key had no entry before t; the latest one when t wrote none.
func TestGetBefore(t *testing.T) {
	s := New(WithDefaultTTL(time.Second))
	if lk := s.GetBefore("k", 1, at(0)); lk.Quality != Missing {
		t.Fatalf("no record: %+v", lk)
	}
	s.Put(Entry{Key: "k0", Value: "outside", Written: at(0)}) // written outside a tick (TickID 0)
	if lk := s.GetBefore("k0", 0, at(0)); lk.Value != "outside" {
		t.Fatalf("before any tick: %+v, want the entry", lk)
	}
	s.Put(Entry{Key: "k", Value: "v1", Module: "m", TickID: 1, Written: at(0)})
	if lk := s.GetBefore("k", 1, at(0)); lk.Quality != Missing || lk.Key != "k" {
		t.Fatalf("before tick 1, which wrote the first entry: %+v, want missing", lk)
	}
	if lk := s.GetBefore("k", 2, at(100*time.Millisecond)); lk.Value != "v1" || lk.Quality != Stale || lk.Age != 100*time.Millisecond {
		t.Fatalf("before tick 2, which wrote nothing: %+v, want v1 stale 100ms", lk)
	}
	first := s.Put(Entry{Key: "k", Value: "v2", Module: "m", TickID: 2, Written: at(100 * time.Millisecond)})
	s.Put(Entry{Key: "k", Value: "v2b", Module: "m", TickID: 2, Written: at(150 * time.Millisecond)})
	lk := s.GetBefore("k", 2, at(1200*time.Millisecond))
	if lk.Value != "v1" || lk.TickID != 1 || lk.Module != "m" || lk.Seq == 0 || lk.Seq >= first.Seq || lk.Quality != Expired {
		t.Fatalf("before tick 2, which wrote twice: %+v, want v1 of tick 1, expired at 1.2 s", lk)
	}
	if lk := s.GetBefore("k", 3, at(200*time.Millisecond)); lk.Value != "v2b" || lk.TickID != 2 {
		t.Fatalf("before tick 3: %+v, want v2b", lk)
	}
	if lk := s.Get("k", at(200*time.Millisecond)); lk.Value != "v2b" {
		t.Fatalf("Get: %+v, want the latest entry", lk)
	}
	s.Delete("k")
	s.Put(Entry{Key: "k", Value: "new", TickID: 4, Written: at(time.Second)})
	if lk := s.GetBefore("k", 4, at(time.Second)); lk.Quality != Missing {
		t.Fatalf("before the first write after a Delete: %+v, want missing", lk)
	}
}

func TestPutGetDoNotAllocate(t *testing.T) {
	s := New()
	s.SetTTL("k", TTL{Auto: true})
	var v any = "value" // boxed once, outside the measured function
	w := t0
	s.Put(Entry{Key: "k", Value: v, Written: w})
	allocs := testing.AllocsPerRun(1000, func() {
		w = w.Add(time.Millisecond)
		s.Put(Entry{Key: "k", Value: v, Module: "m", Written: w})
		if s.Get("k", w).Quality != Stale {
			t.Fatal("not stale")
		}
		_ = s.Get("missing", w)
	})
	if allocs != 0 {
		t.Fatalf("Put of an existing key + Get: %v allocs/op, want 0", allocs)
	}
}

func ExampleStore() {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(WithDefaultTTL(5 * time.Second))
	s.SetTTL("lidar.result", TTL{Fixed: 200 * time.Millisecond})

	s.Put(Entry{Key: "lidar.result", Value: 3, Module: "lidar", TickID: 1, Written: t0})
	for _, d := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond} {
		lk := s.Get("lidar.result", t0.Add(d))
		fmt.Printf("%v: %v value=%v age=%v ttl=%v\n", d, lk.Quality, lk.Value, lk.Age, lk.TTL)
	}
	fmt.Println(s.Get("map.result", t0).Quality)

	// An automatic TTL follows the writer's cadence: 3 × the average interval.
	s.SetTTL("imu.result", TTL{Auto: true})
	for i := range 4 {
		s.Put(Entry{Key: "imu.result", Value: i, Written: t0.Add(time.Duration(i) * 20 * time.Millisecond)})
	}
	fmt.Println("auto ttl:", s.Get("imu.result", t0).TTL)
	fmt.Println("keys:", s.Keys())
	// Output:
	// 50ms: stale value=3 age=50ms ttl=200ms
	// 200ms: expired value=3 age=200ms ttl=200ms
	// missing
	// auto ttl: 60ms
	// keys: [imu.result lidar.result]
}

func BenchmarkPutGet(b *testing.B) {
	s := New()
	s.SetTTL("k", TTL{Auto: true})
	var v any = "value"
	w := t0
	s.Put(Entry{Key: "k", Value: v, Written: w})
	b.ReportAllocs()
	for b.Loop() {
		w = w.Add(time.Millisecond)
		s.Put(Entry{Key: "k", Value: v, Module: "m", TickID: 1, Written: w})
		if s.Get("k", w).Quality != Stale {
			b.Fatal("not stale")
		}
	}
}

func BenchmarkGetParallel(b *testing.B) {
	s := New()
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "module" + strconv.Itoa(i) + ".result"
		s.Put(Entry{Key: keys[i], Value: i, Written: t0})
	}
	now := at(time.Second)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if s.Get(keys[i%len(keys)], now).Quality != Stale {
				b.Fatal("not stale")
			}
			i++
		}
	})
}

// PutValue stores what Put stores, shares its sequence and feeds the automatic TTL.
func TestSlotPutValueEqualsPut(t *testing.T) {
	s := New()
	s.SetTTL("k", TTL{Auto: true, K: 2, Min: time.Millisecond, Max: time.Hour})
	sl := s.Slot("k")
	e1 := sl.Put(Entry{Value: "a", Module: "m", TickID: 1, Written: at(0)})
	seq := sl.PutValue("b", "m", 2, at(100*time.Millisecond))
	if seq != e1.Seq+1 {
		t.Fatalf("PutValue seq = %d, want %d", seq, e1.Seq+1)
	}
	got := s.Get("k", at(100*time.Millisecond))
	want := Entry{Key: "k", Value: "b", Module: "m", TickID: 2, Seq: seq, Written: at(100 * time.Millisecond)}
	if got.Entry != want {
		t.Fatalf("Get after PutValue = %+v, want %+v", got.Entry, want)
	}
	if got.TTL != 200*time.Millisecond { // K × the 100ms interval between the two writes
		t.Fatalf("auto TTL after PutValue = %v, want 200ms", got.TTL)
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
	// Another module writing the key (after a reload) is the entry's module from then on.
	seq = sl.PutValue(nil, "m2", 3, at(200*time.Millisecond))
	want = Entry{Key: "k", Module: "m2", TickID: 3, Seq: seq, Written: at(200 * time.Millisecond)}
	if got := s.Get("k", at(200*time.Millisecond)); got.Entry != want {
		t.Fatalf("Get after PutValue by m2 = %+v, want %+v", got.Entry, want)
	}
}

func TestSlotDetachedByDelete(t *testing.T) {
	s := New()
	sl := s.Slot("k")
	sl.PutValue(1, "m", 1, at(0))
	s.Delete("k")
	// A write through the old slot lands in the detached record: the store neither shows
	// nor counts it.
	sl.PutValue(2, "m", 2, at(10*time.Millisecond))
	if s.Len() != 0 || len(s.Keys()) != 0 {
		t.Fatalf("after a write through a detached slot: Len %d, Keys %v, want 0 and none", s.Len(), s.Keys())
	}
	if lk := s.Get("k", at(10*time.Millisecond)); lk.Quality != Missing {
		t.Fatalf("Get after a write through a detached slot = %v, want missing", lk.Quality)
	}
	if lk := sl.Get(at(10 * time.Millisecond)); lk.Quality != Missing {
		t.Fatalf("Get through the detached slot = %v (%v), want missing, as the store", lk.Quality, lk.Value)
	}
	// The key written again through a new slot is a new record, counted once.
	s.Slot("k").PutValue(3, "m", 3, at(20*time.Millisecond))
	if s.Len() != 1 {
		t.Fatalf("Len after a new write = %d, want 1", s.Len())
	}
	if lk := s.Get("k", at(20*time.Millisecond)); lk.Value != 3 {
		t.Fatalf("Get after a new write = %v, want 3", lk.Value)
	}
	if lk := sl.Get(at(20 * time.Millisecond)); lk.Value != 3 {
		t.Fatalf("Get through the detached slot after a new write = %v, want 3, as the store", lk.Value)
	}
}

// TestRecordLayout keeps a record at 256 bytes, a size class whose objects start on a
// cache line, with what every write updates in the first line and each entry slot on a
// line of its own: a write touches two lines. A field added among the written ones, or
// one that pushes the record past 256 bytes, spreads every write of a module's value over
// more lines again.
func TestRecordLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the record is laid out for 64-bit platforms")
	}
	var r record
	if got := unsafe.Sizeof(r); got != 256 {
		t.Errorf("a record is %d bytes, want 256 (a size class of line-aligned objects)", got)
	}
	if end := unsafe.Offsetof(r.module) + unsafe.Sizeof(r.module); end > 64 {
		t.Errorf("the fields every write updates end at byte %d, past the first cache line", end)
	}
	if off, size := unsafe.Offsetof(r.slots), unsafe.Sizeof(r.slots[0]); off != 64 || size != 64 {
		t.Errorf("the entry slots are %d bytes from byte %d, want a line each from the second", size, off)
	}
	if unsafe.Offsetof(r.st) < unsafe.Offsetof(r.slots)+unsafe.Sizeof(r.slots) {
		t.Error("the store pointer, which a write reads only for a new block of sequence numbers, sits among the written fields")
	}
}

// TestSlotLatest: Latest answers the last entry written through the slot, nothing for a
// slot never written or for a key deleted since (the zero Entry), and, once the detached
// slot is written again, that entry.
func TestSlotLatest(t *testing.T) {
	s := New()
	sl := s.Slot("k")
	if e, ok := sl.Latest(); ok || e != (Entry{}) {
		t.Fatalf("a new slot: %+v, %v; want nothing", e, ok)
	}
	at := time.Unix(100, 0)
	seq := sl.PutValue(7, "m", 3, at)
	want := Entry{Key: "k", Value: 7, Module: "m", TickID: 3, Written: at, Seq: seq}
	if e, ok := sl.Latest(); !ok || e != want {
		t.Fatalf("after a write: %+v, %v; want %+v", e, ok, want)
	}
	s.Delete("k")
	if e, ok := sl.Latest(); ok || e != (Entry{}) {
		t.Fatalf("after Delete: %+v, %v; want the zero Entry", e, ok)
	}
	seq2 := sl.PutValue(8, "m2", 4, at.Add(time.Second))
	want = Entry{Key: "k", Value: 8, Module: "m2", TickID: 4, Written: at.Add(time.Second), Seq: seq2}
	if e, ok := sl.Latest(); !ok || e != want || seq2 <= seq {
		t.Fatalf("written again through the detached slot: %+v, %v; want %+v above seq %d", e, ok, want, seq)
	}
	var nilSlot *Slot
	if _, ok := nilSlot.Latest(); ok {
		t.Fatal("a nil slot has an entry")
	}
}

// TestSlotUnwritten: a slot is unwritten, and Get answers Missing, until its first write;
// a write, or a Delete of its key (whose slot then answers what the store holds), ends that
// for good.
func TestSlotUnwritten(t *testing.T) {
	s := New()
	sl := s.Slot("k")
	if !sl.Unwritten() {
		t.Fatal("a new slot is not unwritten")
	}
	if lk := sl.Get(at(0)); lk.Quality != Missing {
		t.Fatalf("Get of an unwritten slot = %v, want missing", lk.Quality)
	}
	sl.PutValue(1, "m", 1, at(0))
	if sl.Unwritten() {
		t.Fatal("a written slot is unwritten")
	}
	s.Delete("k")
	if sl.Unwritten() {
		t.Fatal("a slot detached by Delete is unwritten")
	}
	other := s.Slot("j")
	s.Delete("j")
	if other.Unwritten() {
		t.Fatal("a slot never written but detached is unwritten: the store may hold a new value for its key")
	}
}
