package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/daemon/recorder"
	"github.com/cycled/cycled/daemon/recorder/sqlite"
)

// flight is the daemon's flight recorder and summary cache, wired around the engine and
// the API. Its zero value (recorder off, no cache) changes nothing.
type flight struct {
	rec   *sqlite.Recorder
	cache *api.Cache
}

// openFlight opens the recorder (when recorder.enabled) and the summary cache. An
// unwritable state_dir is an error naming the path.
func openFlight(ctx context.Context, cfg *config.Config, reg prometheus.Registerer, log *zap.Logger) (*flight, error) {
	f := &flight{}
	if n := cfg.HTTP.CacheBytes; n > 0 {
		c, err := api.NewCache(int64(n))
		if err != nil {
			return nil, err
		}
		f.cache = c
	}
	if !cfg.Recorder.Enabled {
		return f, nil
	}
	rc := cfg.Recorder
	rec, err := sqlite.Open(ctx, sqlite.Options{Dir: cfg.StateDir, Flush: rc.Flush, KeepTicks: rc.KeepTicks,
		KeepFor: rc.KeepFor, MaxBytes: int64(rc.MaxBytes), Logger: log.Named("recorder")})
	if err != nil {
		f.cache.Close()
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	f.rec = rec
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_recorder_dropped_total",
			Help: "Records (summaries and events) the flight recorder dropped: the disk did not keep up or failed."},
			func() float64 { return float64(rec.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cycled_recorder_write_errors_total",
			Help: "Commits of the flight recorder that failed."},
			func() float64 { return float64(rec.WriteErrors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cycled_tick_ids_reserved",
			Help: "The highest tick id durably reserved in state_dir: no tick takes a larger one."},
			func() float64 { return float64(rec.Reserved()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cycled_tick_ids_exhausted",
			Help: "1 while ticks are stopped because the reservation of tick ids cannot be written (state_dir full or failing)."},
			func() float64 {
				if rec.IDsExhausted() != nil {
					return 1
				}
				return 0
			}))
	log.Info("flight recorder", zap.String("path", rec.Path()), zap.String("run_id", rec.RunID()),
		zap.Uint64("first_tick", rec.FirstTick()))
	return f, nil
}

// engineOptions are the recorder's engine options: ids after the recorded ones, the run
// id, the drop report, and the hooks that record.
func (f *flight) engineOptions() []cycle.Option {
	if f.rec == nil {
		return nil
	}
	return []cycle.Option{cycle.WithIdentity(f.rec.Identity()), cycle.WithHooks(f.rec.Hooks())}
}

// gate is the recorder's gate: no tick takes an id that is not durably reserved.
func (f *flight) gate() []cycle.Option {
	if f.rec == nil {
		return nil
	}
	return []cycle.Option{cycle.WithGate(f.rec)}
}

// watch records the engine's decision rules (policies, emergency configuration) for
// "cycled replay --check".
func (f *flight) watch(e *cycle.Engine) {
	if f.rec != nil {
		f.rec.Watch(e)
	}
}

// wire sets the API's recorder, cache and audit, and chains the registration callbacks
// so that registrations and removals are recorded.
func (f *flight) wire(o *api.Options) {
	o.Cache = f.cache
	if f.rec == nil {
		return
	}
	rec := f.rec
	o.Recorder = rec.Reader
	o.TickIDs = rec.IDsExhausted
	o.Audit = func(a api.AdminAction) {
		rec.Event(recorder.KindAdmin, a)
		if a.Route == "POST /emergency/reset" && a.Status < 300 {
			rec.Event(recorder.KindEmergencyReset, a)
		}
	}
	registered, deregistered := o.Registered, o.Deregistered
	o.Registered = func(r cycle.Registration, body []byte) error {
		if registered != nil {
			if err := registered(r, body); err != nil {
				return err
			}
		}
		rec.Event(recorder.KindModuleRegistered, map[string]string{"module": r.Spec.Name, "tier": r.Spec.Tier})
		return nil
	}
	o.Deregistered = func(name string) {
		if deregistered != nil {
			deregistered(name)
		}
		rec.Event(recorder.KindModuleRemoved, map[string]string{"module": name})
	}
}

// reloaded records a reload attempt.
func (f *flight) reloaded(res config.ReloadResult) {
	if f.rec != nil {
		f.rec.Event(recorder.KindConfigReload, res)
	}
}

// close writes what the recorder holds and closes it; then the cache.
func (f *flight) close(log *zap.Logger) {
	if f.rec != nil {
		if err := f.rec.Close(); err != nil {
			log.Error("flight recorder not closed cleanly", zap.String("path", f.rec.Path()), zap.Error(err))
		}
	}
	f.cache.Close()
}
