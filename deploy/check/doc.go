// Package check holds conformance tests that run the real cycled daemon, built from this
// repository: every route's answers against the OpenAPI description (api/openapi.yaml),
// and the metrics that deploy/'s Grafana dashboard and Prometheus rules reference against
// the daemon's /metrics, with the rules parsed by Prometheus's own parser. It is a module
// of its own so that the validator and Prometheus stay out of the product's go.mod.
package check
