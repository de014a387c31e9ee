// Package config loads, validates and hot-reloads the configuration of the cycled daemon.
//
// Load reads a YAML file (or the embedded demo configuration when none is given), applies
// the environment (CYCLED_HTTP_ADDR, CYCLED_CYCLE_PERIOD, … through viper) and the common
// flags, fills the documented defaults (README.md, "Configuration"), and validates the
// whole: every problem is reported at once with the path of the field at fault
// ("tiers[2].budget: must be > 0", "tiers[0].budegt: unknown key"). The key names are
// those of the reference configuration and are part of the contract.
//
// Engine converts a Config into the engine's cycle.Config and module registrations
// (builtin and http modules are built by package modules). DecodeModule decodes one module from a
// JSON body with the same field names, for POST /modules. A Reloader re-reads the file on
// demand (POST /config/reload, SIGHUP) or when it changes, applies it to the engine at the
// next tick boundary, and keeps the running configuration when the new one is invalid.
package config
