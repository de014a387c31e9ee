package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 description of every route of the API, kept in step with
// the handlers by a test that validates a real daemon's answers against it
// (deploy/check).
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the API's OpenAPI 3.1 description as YAML.
func OpenAPI() []byte { return append([]byte(nil), openAPIYAML...) }

// openAPIJSON is the description converted to JSON once.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml as JSON: %w", err)
	}
	return b, nil
})

// getOpenAPI serves GET /openapi.json.
func (s *server) getOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := openAPIJSON()
	if err != nil {
		s.fail(w, r, err, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	writeRaw(w, http.StatusOK, b)
}
