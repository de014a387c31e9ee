package main

import (
	"io"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cycled/cycled/breaker"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/faultsummary"
)

// newLogger returns a zap logger writing to w in the configured format (console or json)
// at the configured level, and the level, which a reload may change.
func newLogger(c config.LogConfig, w io.Writer) (*zap.Logger, zap.AtomicLevel) {
	level := zap.NewAtomicLevelAt(zap.InfoLevel)
	if l, err := zapcore.ParseLevel(c.Level); err == nil {
		level.SetLevel(l)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "ts"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	if c.Format == "json" {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	sink := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(enc, sink, level), zap.ErrorOutput(sink)), level
}

// eventLog logs the engine's state changes (breaker transitions, emergency mode, applied
// configurations) one line each. The engine calls hooks on its own goroutines and they
// must not block, so lines are handed to a goroutine through a bounded queue; when the
// queue is full (a stalled log sink) lines are dropped and counted rather than delaying a
// tick.
type eventLog struct {
	log     *zap.Logger
	ch      chan func()
	done    chan struct{}
	dropped atomic.Uint64

	mu     sync.RWMutex // guards closed against a late hook (an abandoned module returning)
	closed bool
}

func newEventLog(log *zap.Logger) *eventLog {
	l := &eventLog{log: log, ch: make(chan func(), 1024), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for f := range l.ch {
			f()
		}
	}()
	return l
}

// post queues a line without blocking. After Close it does nothing.
func (l *eventLog) post(f func()) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.ch <- f:
	default:
		l.dropped.Add(1)
	}
}

// Close writes the queued lines and stops the goroutine; later events are not logged.
func (l *eventLog) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.ch)
	l.mu.Unlock()
	<-l.done
	if n := l.dropped.Load(); n > 0 {
		l.log.Warn("log lines dropped because the log output was too slow", zap.Uint64("dropped", n))
	}
}

// Hooks returns the engine hooks that log state changes. Module outcomes are logged only
// at debug level, and only when they are not plain successes: never one line per module
// per tick at info.
func (l *eventLog) Hooks() cycle.Hooks {
	return cycle.Hooks{
		OnBreaker: func(t breaker.Transition) {
			l.post(func() {
				fields := []zap.Field{zap.String("breaker", t.Name), zap.String("from", t.From.String()),
					zap.String("to", t.To.String()), zap.String("reason", t.Reason)}
				if t.To == breaker.Open {
					l.log.Warn("circuit breaker opened", fields...)
				} else {
					l.log.Info("circuit breaker "+t.To.String(), fields...)
				}
			})
		},
		OnEmergency: func(ev faultsummary.EmergencyEvent) {
			l.post(func() {
				if ev.Entered {
					l.log.Warn("emergency mode entered", zap.Uint64("tick", ev.TickID), zap.String("reason", ev.Reason),
						zap.Bool("latched", ev.Latched))
				} else {
					l.log.Info("emergency mode left", zap.Uint64("tick", ev.TickID), zap.String("reason", ev.Reason))
				}
			})
		},
		OnApply: func(version uint64) {
			l.post(func() { l.log.Info("configuration applied at a tick boundary", zap.Uint64("version", version)) })
		},
		OnBreakerConfig: func(ev cycle.BreakerConfigEvent) {
			l.post(func() {
				if ev.Conflict {
					l.log.Warn("breaker registered again with other settings: the first registration stays",
						zap.String("breaker", ev.Name), zap.String("diff", ev.Diff))
					return
				}
				l.log.Warn("breaker settings changed by a reload: replaced by a new, closed breaker",
					zap.String("breaker", ev.Name), zap.String("diff", ev.Diff), zap.Uint64("version", ev.Version))
			})
		},
		OnAbandon: func(module string, tick uint64) {
			if l.log.Core().Enabled(zap.DebugLevel) {
				l.post(func() {
					l.log.Debug("module abandoned at its tier deadline", zap.String("module", module), zap.Uint64("tick", tick))
				})
			}
		},
		OnModule: func(ev cycle.ModuleEvent) {
			if ev.Err == nil || !l.log.Core().Enabled(zap.DebugLevel) {
				return
			}
			l.post(func() {
				l.log.Debug("module did not succeed", zap.String("module", ev.Module), zap.String("tier", ev.Tier),
					zap.Uint64("tick", ev.TickID), zap.String("status", string(ev.Status)), zap.Int("attempts", ev.Attempts),
					zap.String("kind", ev.Kind.String()), zap.Error(ev.Err))
			})
		},
		OnShed:    l.logShed,
		OnStartup: l.logStartup,
		OnAsync:   l.logAsync,
	}
}

// logShed logs a step of load shedding: WARN when a step is shed, INFO when restored.
func (l *eventLog) logShed(ev cycle.ShedEvent) {
	l.post(func() {
		fields := []zap.Field{zap.Uint64("tick", ev.TickID), zap.Int("level", ev.Level), zap.Strings("modules", ev.Modules),
			zap.String("reason", ev.Reason)}
		if ev.Shed {
			l.log.Warn("load shedding: a priority class shed", fields...)
		} else {
			l.log.Info("load shedding: a priority class restored", fields...)
		}
	})
}

// logStartup logs the end of startup: INFO when every safety module succeeded, ERROR when
// it timed out into emergency mode.
func (l *eventLog) logStartup(ev cycle.StartupEvent) {
	l.post(func() {
		if ev.TimedOut {
			l.log.Error("startup timed out: entering emergency mode", zap.Uint64("tick", ev.TickID), zap.Strings("pending", ev.Pending))
		} else {
			l.log.Info("startup complete: every safety module succeeded once", zap.Uint64("tick", ev.TickID))
		}
	})
}

// logAsync logs an asynchronous module's change of state, once per change.
func (l *eventLog) logAsync(ev cycle.AsyncEvent) {
	l.post(func() {
		if ev.Failing {
			l.log.Warn("asynchronous module failing", zap.String("module", ev.Module), zap.Uint64("tick", ev.TickID),
				zap.String("kind", ev.Kind.String()), zap.String("error", ev.Err))
		} else {
			l.log.Info("asynchronous module recovered", zap.String("module", ev.Module), zap.Uint64("tick", ev.TickID),
				zap.Int("failures", ev.Failures))
		}
	})
}

// logReload logs the outcome of a reload attempt.
func logReload(log *zap.Logger, res config.ReloadResult) {
	if !res.OK {
		probs := make([]string, len(res.Problems))
		for i, p := range res.Problems {
			probs[i] = p.String()
		}
		log.Error("configuration reload rejected; the running configuration stays", zap.String("trigger", res.Trigger),
			zap.Error(res.Err), zap.Strings("problems", probs))
		return
	}
	fields := []zap.Field{zap.String("trigger", res.Trigger)}
	if len(res.RestartRequired) > 0 {
		fields = append(fields, zap.Strings("restart_required", res.RestartRequired))
	}
	if len(res.SafetyRemoved) > 0 {
		log.Warn("configuration reloaded with allow_safety_removal: safety modules removed",
			append(fields, zap.Strings("safety_removed", res.SafetyRemoved))...)
	} else {
		log.Info("configuration reloaded; applies at the next tick boundary", fields...)
	}
	for _, w := range res.Warnings {
		log.Warn("configuration warning", zap.String("field", w.Path), zap.String("message", w.Message))
	}
}
