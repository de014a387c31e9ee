// Package strictdecode decodes a YAML node tree into Go values strictly: every key must
// name a field, and every scalar must parse into its field's type. It is the one decoder
// behind the configuration file (package config, with line numbers and the environment's
// overrides), the JSON body of POST /modules (config.DecodeModule) and the JSON body of
// POST /modules/{name}/faults (modules.DecodeFaultsPatch).
//
// A decode keeps going after a problem, so that a whole document's mistakes are reported
// at once, each with its field path ("tiers[0].budegt"), the line it is on (files) and, for
// an unknown key, the known key it is probably a typo of ("did you mean \"budget\"?").
// Problems of shape (an unknown key, a value of the wrong type) are counted apart from
// values of the right type that do not parse, because an HTTP API answers the first 400 and
// the second 422.
//
// A JSON body is parsed into the same node tree by JSONObject, refusing duplicate keys and
// trailing data, and decoded with JSON's types held strictly: a string where a number
// belongs, or a number where a string belongs, is a problem of shape, never converted.
//
// Fields are named by their yaml struct tags; ",inline" flattens a struct's fields into its
// parent's, and fields without a tag are not decoded. A null or absent value leaves the
// field as it was, so that pre-filled defaults survive. YAML aliases and merge keys are
// followed within a node budget, so that a small file cannot expand into an exponential
// amount of work.
package strictdecode
