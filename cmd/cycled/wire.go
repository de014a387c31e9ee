package main

import (
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/cycled/cycled/api"
	"github.com/cycled/cycled/config"
	"github.com/cycled/cycled/cycle"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// restore registers the modules saved in state_dir by earlier runs. A saved module that no
// longer decodes or registers (the configuration changed) is logged and skipped; it stays
// saved until it is deleted through the API (DELETE /modules/{name}, see ForgetSaved). A registration's problems name the runtime
// module (runtime_modules[j], as a reload does), not its index among the engine's modules.
func restore(e *cycle.Engine, r *config.Reloader, store *runtimeStore, log *zap.Logger) {
	for _, m := range store.Saved() {
		reg, err := r.DecodeModule(m.Body)
		if err == nil && reg.Spec.Name != m.Name {
			err = fmt.Errorf("saved as %q but its body names %q", m.Name, reg.Spec.Name)
		}
		if err == nil {
			before := e.Registrations() // nothing else registers while the daemon starts
			if err = e.Register(reg); err != nil {
				reg.Origin = cycle.FromRuntime
				err = config.NameRuntimeModules(err, append(before, reg))
			}
		}
		if err != nil {
			log.Warn("runtime module not restored", zap.String("module", m.Name), zap.Error(err))
			continue
		}
		log.Info("runtime module restored", zap.String("module", m.Name))
	}
}

// decodeModule decodes the body of POST /modules. A body that does not decode is a bad
// request (400); a well-formed module with invalid values stays a *tiers.ValidationError
// (422).
func decodeModule(r *config.Reloader, body []byte) (cycle.Registration, error) {
	reg, err := r.DecodeModule(body)
	var de *config.DecodeError
	if errors.As(err, &de) {
		return reg, badRequest(err, de.Problems)
	}
	return reg, err
}

// injectFaults applies the body of POST /modules/{name}/faults to the named module and
// returns the faults now in force.
func injectFaults(e *cycle.Engine, name string, body []byte) (any, error) {
	m, ok := e.Module(name)
	if !ok {
		return nil, fmt.Errorf("module %q: %w", name, cycle.ErrNotFound)
	}
	f, err := modules.ApplyFaultsJSON(m.Module, body)
	var de *modules.DecodeError
	if errors.As(err, &de) {
		return nil, badRequest(err, de.Problems)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"module": name, "faults": f}, nil
}

// badRequest makes err a 400 answer naming the first field at fault in "field" and every
// one in "problems".
func badRequest(err error, ps tiers.Problems) error {
	he := &api.HTTPError{Status: http.StatusBadRequest, Code: "bad_request", Err: err, Problems: ps}
	if len(ps) > 0 {
		he.Field = ps[0].Path
	}
	return he
}
