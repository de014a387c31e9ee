package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// stateFile is the file of state_dir that holds the modules registered at runtime.
const stateFile = "modules.json"

// savedModule is a module registered at runtime: the body of its POST /modules.
type savedModule struct {
	Name string          `json:"name"`
	Body json.RawMessage `json:"body"`
}

// stateDoc is the content of the state file.
type stateDoc struct {
	Version int           `json:"version"`
	Modules []savedModule `json:"modules"`
}

// runtimeStore persists the modules registered at runtime in state_dir, so that a restart
// keeps them. Every change rewrites the file atomically (temporary file, fsync, rename,
// fsync of the directory). An empty dir disables persistence.
//
// A state file that cannot be decoded is never dropped silently: openStore renames it
// aside (modules.json.corrupt-<UTC time>) and reports it, and the daemon starts with the
// modules of its configuration file only. A state file that cannot be read or moved aside
// makes the store refuse to write, so that it is not overwritten either.
type runtimeStore struct {
	dir string

	mu      sync.Mutex
	modules []savedModule // in registration order; guarded by mu
	broken  error         // non-nil: the file could not be read or moved aside; never written

	removedTemps []string // temporary files of an interrupted save, removed at open
}

// removeStaleTemps removes the temporary files (modules.json.*.tmp) that a save
// interrupted by a crash or kill -9 left in dir, and returns their names. Every one found
// at start is stale: a state_dir belongs to one daemon, and this daemon has not saved
// anything yet (see docs/decisions.md, "state_dir").
func removeStaleTemps(dir string) []string {
	found, _ := filepath.Glob(filepath.Join(dir, stateFile+".*.tmp")) // the pattern is valid
	var removed []string
	for _, f := range found {
		if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() {
			continue // not a file this store writes
		}
		if os.Remove(f) == nil {
			removed = append(removed, filepath.Base(f))
		}
	}
	return removed
}

// stateVersion is the version of the state file's format.
const stateVersion = 1

// openStore reads the saved modules of dir (none when the file does not exist). The store
// is usable even with an error: a corrupt file was moved aside (the error says where), an
// unreadable one is left alone and the store refuses to write.
func openStore(dir string) (*runtimeStore, error) {
	return openStoreAt(dir, time.Now())
}

// openStoreAt is openStore with the time that names a corrupt file moved aside.
func openStoreAt(dir string, now time.Time) (*runtimeStore, error) {
	s := &runtimeStore{dir: dir}
	if dir == "" {
		return s, nil
	}
	s.removedTemps = removeStaleTemps(dir)
	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		s.broken = fmt.Errorf("runtime registrations in %s cannot be read, so they are not restored and not overwritten (fix the file or its permissions and restart): %w", path, err)
		return s, s.broken
	}
	doc, derr := decodeState(b)
	if derr == nil {
		s.modules = doc.Modules
		return s, nil
	}
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, aside); err != nil {
		s.broken = fmt.Errorf("runtime registrations in %s are corrupt (%v) and could not be moved aside (%v): they are not restored and not overwritten", path, derr, err)
		return s, s.broken
	}
	syncDir(dir) //nolint:errcheck // best effort: the rename is what matters
	return s, fmt.Errorf("runtime registrations in %s are corrupt (%v): moved aside to %s; starting with the modules of the configuration file only (register the modules again, or repair the file and restart)", path, derr, aside)
}

// decodeState decodes and checks a state file.
func decodeState(b []byte) (stateDoc, error) {
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return stateDoc{}, err
	}
	if dec.More() {
		return stateDoc{}, errors.New("data after the JSON document")
	}
	if doc.Version != stateVersion {
		return stateDoc{}, fmt.Errorf("version %d, want %d", doc.Version, stateVersion)
	}
	seen := map[string]bool{}
	for i, m := range doc.Modules {
		switch {
		case m.Name == "":
			return stateDoc{}, fmt.Errorf("modules[%d]: no name", i)
		case seen[m.Name]:
			return stateDoc{}, fmt.Errorf("modules[%d]: duplicate name %q", i, m.Name)
		case len(m.Body) == 0 || bytes.TrimSpace(m.Body)[0] != '{':
			return stateDoc{}, fmt.Errorf("modules[%d] (%s): body is not a JSON object", i, m.Name)
		}
		seen[m.Name] = true
	}
	return doc, nil
}

// Saved returns the saved modules in registration order.
func (s *runtimeStore) Saved() []savedModule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.modules)
}

// Put records a registration (replacing one of the same name) and saves. If saving fails,
// the store is left as it was, so that a later save does not write the registration.
func (s *runtimeStore) Put(name string, body []byte) error {
	if s.dir == "" {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return fmt.Errorf("save runtime module %q: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := slices.Clone(s.modules)
	s.modules = slices.DeleteFunc(s.modules, func(m savedModule) bool { return m.Name == name })
	s.modules = append(s.modules, savedModule{Name: name, Body: compact.Bytes()})
	return s.saveOrRestoreLocked(prev)
}

// Delete forgets a registration and saves.
func (s *runtimeStore) Delete(name string) error {
	_, err := s.Forget(name)
	return err
}

// Forget is Delete that also reports whether a registration of that name was saved. If
// saving fails, the store is left as it was.
func (s *runtimeStore) Forget(name string) (found bool, err error) {
	if s.dir == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := slices.Clone(s.modules)
	s.modules = slices.DeleteFunc(s.modules, func(m savedModule) bool { return m.Name == name })
	if len(s.modules) == len(prev) {
		return false, nil
	}
	return true, s.saveOrRestoreLocked(prev)
}

// saveOrRestoreLocked saves, or, if that fails, puts back prev, what the store held before
// the change, so that a later save does not write it.
func (s *runtimeStore) saveOrRestoreLocked(prev []savedModule) error {
	if err := s.saveLocked(); err != nil {
		s.modules = prev
		return err
	}
	return nil
}

func (s *runtimeStore) saveLocked() error {
	if s.broken != nil {
		return s.broken
	}
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	doc := stateDoc{Version: stateVersion, Modules: s.modules}
	if doc.Modules == nil {
		doc.Modules = []savedModule{}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	tmp, err := os.CreateTemp(s.dir, stateFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("save runtime modules: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save runtime modules: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, stateFile)); err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("save runtime modules: the file was replaced but the rename may not survive a crash: %w", err)
	}
	return nil
}

// syncDir fsyncs directory dir, making a rename in it durable. File systems that cannot
// sync a directory (EINVAL, ENOTSUP) are not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}
