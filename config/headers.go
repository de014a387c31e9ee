package config

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/cycled/cycled/internal/strictdecode"
	"github.com/cycled/cycled/modules"
	"github.com/cycled/cycled/tiers"
)

// maxHeaderFile is the largest file a header value is read from.
const maxHeaderFile = 4 << 10

// resolve returns the header's value; on error, path names the offending field ("env",
// "file", or "" for the value as a whole).
func (h HeaderValue) resolve() (v, path string, err error) {
	switch {
	case h.Env != "" && h.File != "", (h.Env != "" || h.File != "") && h.Value != "":
		return "", "", errors.New("give one of value, env and file")
	case h.Env != "":
		v, ok := os.LookupEnv(h.Env)
		if !ok {
			return "", "env", fmt.Errorf("environment variable %s is not set", h.Env)
		}
		return v, "", nil
	case h.File != "":
		v, err := readSecretFile(h.File)
		if err != nil {
			return "", "file", err
		}
		return v, "", nil
	}
	return h.Value, "", nil
}

// readSecretFile reads a header value from path: at most maxHeaderFile bytes, surrounding
// whitespace trimmed, not empty. Its errors never quote the content.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the value: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHeaderFile+1))
	if err != nil {
		return "", fmt.Errorf("cannot read the value: %w", err)
	}
	if len(b) > maxHeaderFile {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxHeaderFile)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// plainValue is how GET /config shows a header value: where it comes from, never the
// value itself.
func (h HeaderValue) plainValue() any {
	switch {
	case h.Env != "":
		return map[string]any{"env": h.Env}
	case h.File != "":
		return map[string]any{"file": h.File}
	}
	return modules.Redacted
}

// plainValue is how GET /config shows a remote module's settings: the URL redacted
// (modules.RedactURL), the header values by their source.
func (c HTTPModuleConfig) plainValue() any {
	type fields HTTPModuleConfig // the same fields without the method: encoded one by one
	c.URL = modules.RedactURL(c.URL)
	return encodePlain(reflect.ValueOf(fields(c)))
}

// plainer is a value with its own plain form in GET /config (see encodePlain).
type plainer interface{ plainValue() any }

// SetScalar sets h to the literal value v: the decoder calls it for a header value given
// as a plain string instead of a mapping.
func (h *HeaderValue) SetScalar(v string) { *h = HeaderValue{Value: v} }

// allows reports why a runtime registration may not take header value h from where it
// says ("" when it may): a literal always, an env or file source only if src lists it.
func (src HeaderSources) allows(h HeaderValue) (path, why string) {
	switch {
	case h.Env != "" && !slices.Contains(src.Env, h.Env):
		return "env", fmt.Sprintf("a module registered at runtime may not read the daemon's environment variable %s: "+
			"list it in http.runtime_header_sources.env of the configuration file, or give the value", h.Env)
	case h.File != "" && !slices.Contains(cleaned(src.File), filepath.Clean(h.File)):
		return "file", fmt.Sprintf("a module registered at runtime may not read the daemon's file %s: "+
			"list it in http.runtime_header_sources.file of the configuration file, or give the value", h.File)
	}
	return "", ""
}

// cleaned returns the paths cleaned.
func cleaned(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Clean(p)
	}
	return out
}

// checkHeaderSources reports every header of m that takes its value from a source that a
// runtime registration may not use under src.
func (m ModuleConfig) checkHeaderSources(src HeaderSources) tiers.Problems {
	if m.HTTP == nil {
		return nil
	}
	var ps tiers.Problems
	for _, name := range slices.Sorted(maps.Keys(m.HTTP.Headers)) {
		if path, why := src.allows(m.HTTP.Headers[name]); why != "" {
			ps = append(ps, tiers.Problem{Path: strictdecode.Sub(strictdecode.Join("http.headers", name), path), Message: why})
		}
	}
	return ps
}
