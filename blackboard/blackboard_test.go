package blackboard

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cycled/cycled/lastgood"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSourceText(t *testing.T) {
	for s, name := range map[Source]string{None: "none", Live: "live", LastGood: "last_good"} {
		b, err := s.MarshalText()
		if err != nil || string(b) != name || s.String() != name {
			t.Errorf("Source(%d) text = %q, %v; want %q", uint8(s), b, err, name)
		}
		back := Source(99)
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, s)
		}
	}
	if got := Source(7).String(); got != "source(7)" {
		t.Errorf("Source(7).String() = %q", got)
	}
	for _, bad := range []string{"", "Live", "lastgood", "stale"} {
		var s Source
		if err := s.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) succeeded, want an error", bad)
		}
	}
}

func TestBoardLiveEntries(t *testing.T) {
	b := New(lastgood.New())
	if b.Tick() != 0 {
		t.Fatalf("Tick() before Begin = %d", b.Tick())
	}
	b.Begin(1, t0)
	if b.Tick() != 1 {
		t.Fatalf("Tick() = %d, want 1", b.Tick())
	}
	a := Entry{Key: "a", Value: 1, Module: "ma", TickID: 1, Seq: 4, Written: t0, Source: Live}
	c := Entry{Key: "c", Value: "x", Module: "mc", TickID: 1, Seq: 5, Written: t0, Source: Live, DerivedFromStale: true}
	b.Put(c, a)
	for _, want := range []Entry{a, c} {
		got, ok := b.Get(want.Key)
		if !ok || got != want {
			t.Errorf("Get(%q) = %+v, %v; want %+v", want.Key, got, ok, want)
		}
	}
	if es := b.Entries(); len(es) != 2 || es[0] != a || es[1] != c {
		t.Errorf("Entries() = %+v, want [a c] sorted by key", es)
	}
	// A later Put of the same key in the same tick wins.
	a2 := a
	a2.Value = 2
	b.Put(a2)
	if got, _ := b.Get("a"); got.Value != 2 {
		t.Errorf("Get after a second Put = %v, want 2", got.Value)
	}
	// Entries is a copy.
	es := b.Entries()
	es[0].Value = "mutated"
	if got, _ := b.Get("a"); got.Value != 2 {
		t.Errorf("mutating Entries() changed the board: %v", got.Value)
	}
	// Begin clears the previous tick.
	b.Begin(2, t0.Add(100*time.Millisecond))
	if es := b.Entries(); len(es) != 0 {
		t.Errorf("Entries() after Begin = %+v, want none", es)
	}
	if _, ok := b.Get("c"); ok {
		t.Error("an entry of the previous tick survived Begin")
	}
}

// TestBoardFallback checks what a reader sees for a key not written this tick: the
// last-known-good value tagged stale while younger than its TTL (age measured at the tick's
// start, not at the read), nothing (none, expired) after, and ok=false for a key that never
// had a value.
func TestBoardFallback(t *testing.T) {
	const ttl = 100 * time.Millisecond
	lg := lastgood.New()
	lg.SetTTL("k", lastgood.TTL{Fixed: ttl})
	stored := lg.Put(lastgood.Entry{Key: "k", Value: "v", Module: "m", TickID: 3, Written: t0})

	tests := []struct {
		name    string
		start   time.Duration // tick start, relative to the write
		ok      bool
		want    Entry
		degrade bool
	}{
		{"same instant", 0, true, Entry{Key: "k", Value: "v", Module: "m", TickID: 3, Seq: stored.Seq, Written: t0, Source: LastGood, Stale: true}, true},
		{"within ttl", 30 * time.Millisecond, true, Entry{Key: "k", Value: "v", Module: "m", TickID: 3, Seq: stored.Seq, Written: t0, Source: LastGood, Stale: true, Age: 30 * time.Millisecond}, true},
		{"1ns before ttl", ttl - 1, true, Entry{Key: "k", Value: "v", Module: "m", TickID: 3, Seq: stored.Seq, Written: t0, Source: LastGood, Stale: true, Age: ttl - 1}, true},
		{"at ttl", ttl, true, Entry{Key: "k", Module: "m", TickID: 3, Seq: stored.Seq, Written: t0, Source: None, Expired: true, Age: ttl}, true},
		{"long after", time.Hour, true, Entry{Key: "k", Module: "m", TickID: 3, Seq: stored.Seq, Written: t0, Source: None, Expired: true, Age: time.Hour}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(lg)
			b.Begin(9, t0.Add(tt.start))
			got, ok := b.Get("k")
			if ok != tt.ok || got != tt.want {
				t.Fatalf("Get = %+v, %v\nwant   %+v, %v", got, ok, tt.want, tt.ok)
			}
			if got.Degraded() != tt.degrade {
				t.Errorf("Degraded() = %v", got.Degraded())
			}
			if got, ok := b.Get("never"); ok || got != (Entry{}) {
				t.Errorf("Get(never written) = %+v, %v; want zero, false", got, ok)
			}
		})
	}

	t.Run("age is measured at each tick's start", func(t *testing.T) {
		b := New(lg)
		for _, start := range []time.Duration{40 * time.Millisecond, 70 * time.Millisecond, 10 * time.Millisecond} {
			b.Begin(9, t0.Add(start))
			for range 2 { // reading twice in a tick gives the same age: no clock is read
				if got, _ := b.Get("k"); got.Age != start || !got.Stale {
					t.Fatalf("tick starting at +%v: %+v, want stale with age %v", start, got, start)
				}
			}
		}
	})

	t.Run("a live write shadows last-known-good", func(t *testing.T) {
		b := New(lg)
		b.Begin(10, t0.Add(time.Hour))
		live := Entry{Key: "k", Value: "fresh", Module: "m", TickID: 10, Source: Live}
		b.Put(live)
		if got, ok := b.Get("k"); !ok || got != live || got.Degraded() {
			t.Errorf("Get = %+v, %v; want the live entry", got, ok)
		}
	})

	t.Run("no store", func(t *testing.T) {
		b := New(nil)
		b.Begin(1, t0)
		if _, ok := b.Get("k"); ok {
			t.Error("a board without a store served a value")
		}
	})
}

func TestFromLastGood(t *testing.T) {
	base := lastgood.Entry{Key: "k", Value: 5, Module: "m", TickID: 2, Written: t0, Seq: 7}
	tests := []struct {
		name string
		in   lastgood.Lookup
		want Entry
		ok   bool
	}{
		{"missing", lastgood.Lookup{Entry: lastgood.Entry{Key: "k"}, Quality: lastgood.Missing}, Entry{}, false},
		{"stale", lastgood.Lookup{Entry: base, Quality: lastgood.Stale, Age: time.Second, TTL: 5 * time.Second},
			Entry{Key: "k", Value: 5, Module: "m", TickID: 2, Seq: 7, Written: t0, Source: LastGood, Stale: true, Age: time.Second}, true},
		{"expired", lastgood.Lookup{Entry: base, Quality: lastgood.Expired, Age: 6 * time.Second, TTL: 5 * time.Second},
			Entry{Key: "k", Module: "m", TickID: 2, Seq: 7, Written: t0, Source: None, Expired: true, Age: 6 * time.Second}, true},
		{"unknown quality", lastgood.Lookup{Entry: base, Quality: 9}, Entry{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromLastGood(tt.in)
			if ok != tt.ok || got != tt.want {
				t.Errorf("FromLastGood = %+v, %v\nwant           %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDegraded(t *testing.T) {
	tests := []struct {
		e    Entry
		want bool
	}{
		{Entry{Source: Live}, false},
		{Entry{Source: Live, DerivedFromStale: true}, true},
		{Entry{Source: LastGood, Stale: true}, true},
		{Entry{Source: None, Expired: true}, true},
		{Entry{}, true},
	}
	for _, tt := range tests {
		if got := tt.e.Degraded(); got != tt.want {
			t.Errorf("%+v.Degraded() = %v, want %v", tt.e, got, tt.want)
		}
	}
}

func TestEntryJSON(t *testing.T) {
	written := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	e := Entry{Key: "lidar.result", Value: "scan", Module: "lidar", TickID: 41, Seq: 9, Written: written,
		Source: LastGood, Stale: true, Age: 1500 * time.Microsecond, DerivedFromStale: true}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"key": "lidar.result", "value": "scan", "module": "lidar", "tick_id": 41.0, "seq": 9.0,
		"written_at": "2025-01-02T03:04:05.123456789Z", "source": "last_good", "stale": true,
		"expired": false, "age_ms": 1.5, "derived_from_stale": true,
	}
	if !maps.Equal(m, want) {
		t.Fatalf("JSON = %s\nwant keys and values %v", b, want)
	}
	var back Entry
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != e {
		t.Errorf("round trip = %+v\nwant       %+v", back, e)
	}

	// Nothing served: value null, no provenance, the flags and age always present.
	b, _ = json.Marshal(Entry{Key: "k", Source: None, Expired: true, Age: 2 * time.Second})
	if got, want := string(b), `{"key":"k","value":null,"source":"none","stale":false,"expired":true,"age_ms":2000,"derived_from_stale":false}`; got != want {
		t.Errorf("JSON = %s\nwant   %s", got, want)
	}
	if err := json.Unmarshal([]byte(`{"key":"k","source":"fresh"}`), &back); err == nil {
		t.Error("an unknown source was accepted")
	}
	if err := json.Unmarshal([]byte(`{"key":1}`), &back); err == nil {
		t.Error("a malformed entry was accepted")
	}
}

// TestEntryJSONAgeRoundTrip checks that the age survives its trip through floating-point
// milliseconds to the nanosecond (ms·1e6 can land just below the integer it encodes).
func TestEntryJSONAgeRoundTrip(t *testing.T) {
	ages := []time.Duration{0, 1, 3, 498, 1009, 1982, 999_999, 123_456_789, 4*time.Hour + 17, 90 * 24 * time.Hour}
	for i := time.Duration(1); i < 200_000; i += 37 {
		ages = append(ages, i)
	}
	for _, age := range ages {
		b, err := json.Marshal(Entry{Key: "k", Source: LastGood, Stale: true, Age: age})
		if err != nil {
			t.Fatal(err)
		}
		var back Entry
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Age != age {
			t.Fatalf("age %dns came back as %dns (JSON %s)", age, back.Age, b)
		}
	}
}

func TestMillis(t *testing.T) {
	for d, want := range map[time.Duration]float64{0: 0, time.Millisecond: 1, 1500 * time.Microsecond: 1.5, time.Nanosecond: 1e-6, -2 * time.Millisecond: -2, time.Minute: 60000} {
		if got := Millis(d); got != want {
			t.Errorf("Millis(%v) = %v, want %v", d, got, want)
		}
	}
}

// TestBoardConcurrentReaders runs readers against a writer under -race. The writer begins
// a tick and writes its keys; a reader only ever sees entries of the tick in progress, each
// whole (value and provenance from one write), and the last-known-good fallback for keys
// not written yet this tick.
func TestBoardConcurrentReaders(t *testing.T) {
	lg := lastgood.New()
	lg.Put(lastgood.Entry{Key: "a", Value: uint64(0), Module: "w", Written: t0})
	b := New(lg)
	const ticks = 2000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan string, 8)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	for r := range 4 {
		wg.Go(func() {
			var lastTick uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				tick := b.Tick()
				if tick < lastTick {
					report("Tick() went back from %d to %d", lastTick, tick)
				}
				lastTick = tick
				e, ok := b.GetFor("a", 1+r%2)
				switch {
				case !ok:
					report("a: not served")
				case e.Source == Live:
					if e.Value != e.TickID || e.Module != "w" || e.TickID < tick {
						report("live a read in tick %d: %+v", tick, e)
					}
				case e.Source == LastGood:
					if !e.Stale || e.Value != uint64(0) {
						report("fallback a: %+v", e)
					}
				default:
					report("a: unexpected %+v", e)
				}
				es := b.Entries()
				for i, e := range es {
					if e.Value != e.TickID || e.TickID < tick || (i > 0 && es[i-1].Key >= e.Key) {
						report("Entries() in tick %d: %+v", tick, es)
						break
					}
				}
			}
		})
	}
	slots := []*Slot{b.Slot("a"), b.Slot("b")}
	for id := uint64(1); id <= ticks; id++ {
		b.Begin(id, t0.Add(time.Duration(id)*time.Millisecond))
		b.Set(slots[0], 0, Entry{Value: id, Module: "w", TickID: id, Source: Live})
		b.Put(Entry{Key: "b", Value: id, Module: "w", TickID: id, Source: Live})
	}
	close(done)
	wg.Wait()
	close(errs)
	var msgs []string
	for m := range errs {
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		t.Fatalf("readers saw inconsistent boards:\n%s", strings.Join(msgs, "\n"))
	}
	if b.Tick() != ticks {
		t.Errorf("Tick() = %d, want %d", b.Tick(), ticks)
	}
}

// TestBoardTierVisibility: a reader in tier k sees the live values written this tick by
// tiers < k, and the tagged fallback for values written by its own or a later tier.
func TestBoardTierVisibility(t *testing.T) {
	lg := lastgood.New()
	lg.Put(lastgood.Entry{Key: "k", Value: "old", Module: "m", TickID: 1, Written: t0})
	b := New(lg)
	b.Begin(2, t0.Add(20*time.Millisecond))
	sl := b.Slot("k")
	if b.Slot("k") != sl {
		t.Fatal("Slot returned two slots for one key")
	}
	b.Set(sl, 1, Entry{Key: "ignored", Value: "new", Module: "m", TickID: 2, Source: Live})
	for reader, want := range map[int]string{0: "old", 1: "old", 2: "new", 5: "new"} {
		e, ok := b.GetFor("k", reader)
		if !ok || e.Value != want || (want == "old") != e.Stale || e.Key != "k" {
			t.Errorf("GetFor(k, tier %d) = %+v, %v; want %q", reader, e, ok, want)
		}
		if want == "old" && e.Age != 20*time.Millisecond {
			t.Errorf("GetFor(k, tier %d): fallback age %v, want 20ms", reader, e.Age)
		}
	}
	if e, _ := b.Get("k"); e.Value != "new" {
		t.Errorf("Get (outside the tiers) = %+v, want the live value", e)
	}
	if es := b.Entries(); len(es) != 1 || es[0].Key != "k" || es[0].Value != "new" {
		t.Errorf("Entries() = %+v", es)
	}
	// Written by "tier -1" (Put): visible to every reader, the safety tier included.
	b.Put(Entry{Key: "k", Value: "put", TickID: 2, Source: Live})
	if e, _ := b.GetFor("k", 0); e.Value != "put" {
		t.Errorf("GetFor(k, 0) after Put = %+v", e)
	}
	// The next tick does not see this tick's writes.
	b.Begin(3, t0.Add(30*time.Millisecond))
	if e, _ := b.GetFor("k", 9); e.Value != "old" || e.Age != 30*time.Millisecond {
		t.Errorf("next tick: %+v, want the fallback aged 30ms", e)
	}
	if es := b.Entries(); len(es) != 0 {
		t.Errorf("Entries() in the next tick = %+v, want none", es)
	}
	// Remove forgets the slot; a fresh slot starts empty.
	b.Set(sl, -1, Entry{Value: "x", Source: Live})
	b.Remove("k")
	if e, _ := b.Get("k"); e.Value != "old" {
		t.Errorf("Get after Remove = %+v, want the fallback", e)
	}
	if b.Slot("k") == sl {
		t.Error("Slot after Remove returned the removed slot")
	}
}

func BenchmarkBoardGet(b *testing.B) {
	lg := lastgood.New()
	lg.Put(lastgood.Entry{Key: "fallback", Value: 1, Module: "m", Written: t0})
	board := New(lg)
	board.Begin(2, t0.Add(time.Millisecond))
	board.Put(Entry{Key: "live", Value: 1, Module: "m", TickID: 2, Source: Live})
	for _, key := range []string{"live", "fallback", "missing"} {
		b.Run(key, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				board.Get(key)
			}
		})
	}
}

// SetLive serves what Set serves for a live entry, with the same tier visibility, reading
// the value from the key's last-known-good record; the next tick, a later Set, a later
// write to the record and a Delete of its key each end it.
func TestSetLiveEqualsSet(t *testing.T) {
	lgSet, lgLive := lastgood.New(), lastgood.New()
	viaSet, viaLive := New(lgSet), New(lgLive)
	for _, b := range []*Board{viaSet, viaLive} {
		b.Begin(3, t0)
	}
	written := t0.Add(time.Millisecond)
	from := lgLive.Slot("k")
	seq := from.PutValue(7, "m", 3, written)
	lgSet.Slot("k").PutValue(7, "m", 3, written)
	want := Entry{Key: "k", Value: 7, Module: "m", TickID: 3, Seq: seq, Written: written, Source: Live, DerivedFromStale: true}
	viaSet.Set(viaSet.Slot("k"), 1, want)
	viaLive.SetLive(viaLive.Slot("k"), from, 1, true)
	same := func(when string) {
		t.Helper()
		for _, reader := range []int{0, 1, 2} {
			a, aok := viaSet.GetFor("k", reader)
			b, bok := viaLive.GetFor("k", reader)
			if a != b || aok != bok {
				t.Errorf("%s, reader tier %d: SetLive gives %+v %v, Set gives %+v %v", when, reader, b, bok, a, aok)
			}
		}
		if a, b := viaSet.Entries(), viaLive.Entries(); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: Entries %+v, want %+v", when, b, a)
		}
	}
	same("this tick")
	if got, ok := viaLive.GetFor("k", 2); !ok || got != want {
		t.Errorf("a later tier reads %+v, %v; want %+v", got, ok, want)
	}
	// A later Set in the same tick replaces it.
	over := Entry{Key: "k", Module: "op", Source: None}
	viaSet.Set(viaSet.Slot("k"), -1, over)
	viaLive.Set(viaLive.Slot("k"), -1, over)
	same("after Set")
	// Live again, then the next tick: both serve the stored value, stale.
	viaLive.SetLive(viaLive.Slot("k"), from, 1, true)
	viaSet.Set(viaSet.Slot("k"), 1, want)
	for _, b := range []*Board{viaSet, viaLive} {
		b.Begin(4, t0.Add(time.Second))
	}
	same("next tick")
	if got, _ := viaLive.Get("k"); got.Source != LastGood || !got.Stale || got.Value != 7 {
		t.Errorf("next tick reads %+v, want the stale value", got)
	}
	// Written live in tick 4, the record is then deleted (the module deregistered):
	// nothing live is served from a record that no longer holds the write.
	from.PutValue(8, "m", 4, t0.Add(time.Second))
	viaLive.SetLive(viaLive.Slot("k"), from, 1, false)
	if got, ok := viaLive.Get("k"); !ok || got.Value != 8 || got.Source != Live {
		t.Fatalf("live in tick 4 reads %+v, %v", got, ok)
	}
	lgLive.Delete("k")
	from.PutValue(9, "m", 5, t0.Add(2*time.Second)) // a late write through the detached slot
	if got, ok := viaLive.Get("k"); ok && got.Source == Live {
		t.Errorf("after Delete and a later write, reads %+v live", got)
	}
}

// A slot fits the 144-byte size class (a slot per key, a key per module: the next class
// is 160): the entry's flags lie together.
func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(Slot{}); n > 144 {
		t.Fatalf("a slot is %d bytes; keep it within 144", n)
	}
}
