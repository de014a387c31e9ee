package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/cycled/cycled/modules"
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
