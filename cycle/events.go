package cycle

import (
	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/faultsummary"
)

// eventKind says what an event carries.
type eventKind uint8

// The events of the engine.
const (
	evTick          eventKind = iota + 1 // a published summary (and its module lines)
	evBreaker                            // a breaker transition
	evEmergency                          // emergency mode entered or left
	evAbandon                            // a module abandoned at its tier deadline
	evApply                              // a configuration applied at a tick boundary
	evShed                               // a step of load shedding
	evStartup                            // the end of startup
	evAsync                              // an asynchronous module's run ended in a new state
	evBreakerConfig                      // a named breaker replaced by a reload, or a conflicting registration ignored
)

// event is one thing the engine tells its observers. The engine publishes each event once
// (Engine.emit), and every subscriber receives it in the order they were added: the hub
// (the stream's subscribers) first, then the hooks. A subscriber runs on the goroutine
// that published the event and must not block.
type event struct {
	kind      eventKind
	tick      uint64
	summary   *faultsummary.Summary // evTick
	st        *state                // evTick: the state the tick ran under
	lines     *tickLines            // evTick
	breaker   breaker.Transition    // evBreaker
	emergency faultsummary.EmergencyEvent
	module    string // evAbandon
	version   uint64 // evApply
	brConfig  *BreakerConfigEvent
	shed      ShedEvent    // evShed
	startup   StartupEvent // evStartup
	async     AsyncEvent   // evAsync
}

// BreakerEvent returns breaker transition t, in tick, as the stream carries it and the
// recorder keeps it: the one conversion.
func BreakerEvent(t breaker.Transition, tick uint64) faultsummary.BreakerEvent {
	return faultsummary.BreakerEvent{Breaker: t.Name, From: t.From.String(), To: t.To.String(), Reason: t.Reason,
		At: t.At, TickID: tick}
}

// subscriber receives the engine's events (by value: publishing allocates nothing).
type subscriber func(event)

// emit publishes ev to every subscriber.
func (e *Engine) emit(ev event) {
	for _, sub := range e.subs {
		sub(ev)
	}
}

// hubSubscriber streams ticks, breaker transitions and emergency changes on hub; the hub
// never blocks the publisher.
func hubSubscriber(hub *faultsummary.Hub) subscriber {
	return func(ev event) {
		switch ev.kind {
		case evTick:
			hub.Publish(faultsummary.Event{Type: faultsummary.EventTick, Summary: ev.summary})
		case evBreaker:
			be := BreakerEvent(ev.breaker, ev.tick)
			hub.Publish(faultsummary.Event{Type: faultsummary.EventBreaker, Breaker: &be})
		case evEmergency:
			em := ev.emergency
			hub.Publish(faultsummary.Event{Type: faultsummary.EventEmergency, Emergency: &em})
		case evShed:
			sh := ev.shed
			hub.Publish(faultsummary.Event{Type: faultsummary.EventShed, Shed: &sh})
		}
	}
}

// hooksSubscriber calls the hooks h for each event: for a tick, OnModule for every module
// line, then OnTick.
func hooksSubscriber(h Hooks) subscriber {
	return func(ev event) {
		switch ev.kind {
		case evTick:
			if h.OnModule != nil {
				moduleEvents(ev, h.OnModule)
			}
			if h.OnTick != nil {
				h.OnTick(ev.summary)
			}
		case evBreaker:
			if h.OnBreaker != nil {
				h.OnBreaker(ev.breaker)
			}
		case evEmergency:
			if h.OnEmergency != nil {
				h.OnEmergency(ev.emergency)
			}
		case evAbandon:
			if h.OnAbandon != nil {
				h.OnAbandon(ev.module, ev.tick)
			}
		case evApply:
			if h.OnApply != nil {
				h.OnApply(ev.version)
			}
		case evBreakerConfig:
			if h.OnBreakerConfig != nil {
				h.OnBreakerConfig(*ev.brConfig)
			}

		default:
			guardHooks(h, ev)
		}
	}
}

// moduleEvents calls f with the outcome of every module of tick ev, in summary order.
func moduleEvents(ev event, f func(ModuleEvent)) {
	st, tl := ev.st, ev.lines
	for i, rt := range st.lines {
		r := &tl.recs[i]
		f(ModuleEvent{TickID: ev.tick, Module: rt.name, Tier: st.cfg.Tiers[rt.planned.TierIndex].Name,
			Status: r.status.Public(), Attempts: int(r.attempts), Latency: r.latency, Kind: r.kind,
			Err: r.err(rt)})
	}
}

// guardHooks calls the hooks of load shedding, startup and asynchronous modules for ev.
func guardHooks(h Hooks, ev event) {
	switch ev.kind {
	case evShed:
		if h.OnShed != nil {
			h.OnShed(ev.shed)
		}
	case evStartup:
		if h.OnStartup != nil {
			h.OnStartup(ev.startup)
		}
	case evAsync:
		if h.OnAsync != nil {
			h.OnAsync(ev.async)
		}
	}
}
