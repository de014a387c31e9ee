package faultsummary

import (
	"sync"
	"sync/atomic"
	"time"
)

// EventType names a streamed event.
type EventType string

// The event types of the stream.
const (
	// EventTick carries a summary.
	EventTick EventType = "tick"
	// EventBreaker carries a breaker transition.
	EventBreaker EventType = "breaker"
	// EventEmergency carries an emergency enter or leave.
	EventEmergency EventType = "emergency"
	// EventShed carries a step of load shedding.
	EventShed EventType = "shed"
)

// EventTypes returns every event type of the stream, the one list: the stream names each
// event by its type, and the HTTP description is compared with it.
func EventTypes() []EventType { return []EventType{EventTick, EventBreaker, EventEmergency, EventShed} }

// ShedEvent is one step of load shedding: the engine's hooks receive it (cycle.ShedEvent
// is this type) and the stream carries it.
type ShedEvent struct {
	// TickID is the tick after which the step was taken; it applies from the next.
	TickID uint64 `json:"tick_id"`
	// Shed is true for a step shed, false for a step restored.
	Shed bool `json:"shed"`
	// Level is the number of steps shed after it.
	Level int `json:"level"`
	// Modules names the modules shed after it.
	Modules []string `json:"modules"`
	// Reason says why shedding is on (empty once everything is restored).
	Reason string `json:"reason"`
}

// BreakerEvent is a breaker transition as streamed.
type BreakerEvent struct {
	Breaker string    `json:"breaker"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
	TickID  uint64    `json:"tick_id"`
}

// EmergencyEvent is an emergency enter or leave as streamed.
type EmergencyEvent struct {
	// Entered is true on entering, false on leaving.
	Entered bool      `json:"entered"`
	TickID  uint64    `json:"tick_id"`
	Reason  string    `json:"reason"`
	Latched bool      `json:"latched"`
	At      time.Time `json:"at"`
}

// Event is one item of the stream; exactly one of the pointers matches Type.
type Event struct {
	Type      EventType       `json:"type"`
	Summary   *Summary        `json:"summary,omitempty"`
	Breaker   *BreakerEvent   `json:"breaker,omitempty"`
	Emergency *EmergencyEvent `json:"emergency,omitempty"`
	Shed      *ShedEvent      `json:"shed,omitempty"`
}

// Hub fans events out to subscribers without ever blocking the publisher.
type Hub struct {
	mu   sync.RWMutex
	subs map[*Subscription]struct{} // guarded by mu
}

// NewHub returns a hub with no subscribers.
func NewHub() *Hub { return &Hub{subs: make(map[*Subscription]struct{})} }

// Subscription receives events from a Hub.
type Subscription struct {
	hub     *Hub
	ch      chan Event
	mu      sync.Mutex // serialises the skip-ahead of concurrent publishers
	dropped atomic.Uint64
	once    sync.Once
}

// Subscribe returns a subscription buffering up to buf events (buf < 1 means 16).
func (h *Hub) Subscribe(buf int) *Subscription {
	if buf < 1 {
		buf = 16
	}
	s := &Subscription{hub: h, ch: make(chan Event, buf)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Subscribers returns the number of open subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs)
}

// Publish delivers e to every subscriber. A subscriber whose buffer is full loses its
// oldest event (counted in Dropped) so that it skips ahead; Publish never blocks.
func (h *Hub) Publish(e Event) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		s.offer(e)
	}
}

func (s *Subscription) offer(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		select {
		case s.ch <- e:
			return
		default:
		}
		select {
		case <-s.ch:
			s.dropped.Add(1)
		default:
		}
	}
}

// C returns the channel of events. It is closed by Close.
func (s *Subscription) C() <-chan Event { return s.ch }

// Dropped returns how many events were dropped because the subscriber fell behind.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes the channel.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.hub.mu.Lock()
		delete(s.hub.subs, s)
		s.hub.mu.Unlock()
		s.mu.Lock()
		close(s.ch)
		s.mu.Unlock()
	})
}
