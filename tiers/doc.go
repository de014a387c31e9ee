// Package tiers defines what the engine runs: tier specs, the Module interface, module
// specs, and the validation of a whole configuration into a Plan.
//
// Validate reports every problem at once, each with the path of the field at fault
// ("tiers[2].budget: must be > 0", "modules[3].writes: key \"x\" is also written by \"y\"").
// The same code path validates a configuration file, a hot reload and a module registered
// at runtime, so the messages are identical everywhere.
package tiers
