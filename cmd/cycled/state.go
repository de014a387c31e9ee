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
type runtimeStore struct {
	dir string

	mu      sync.Mutex
	modules []savedModule // in registration order; guarded by mu
}

// openStore reads the saved modules of dir (none when the file does not exist).
func openStore(dir string) (*runtimeStore, error) {
	s := &runtimeStore{dir: dir}
	if dir == "" {
		return s, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read runtime modules: %w", err)
	}
	var doc stateDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return s, fmt.Errorf("read runtime modules %s: %w", filepath.Join(dir, stateFile), err)
	}
	s.modules = doc.Modules
	return s, nil
}

// Saved returns the saved modules in registration order.
func (s *runtimeStore) Saved() []savedModule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.modules)
}

// Put records a registration (replacing one of the same name) and saves.
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
	s.modules = slices.DeleteFunc(s.modules, func(m savedModule) bool { return m.Name == name })
	s.modules = append(s.modules, savedModule{Name: name, Body: compact.Bytes()})
	return s.saveLocked()
}

// Delete forgets a registration and saves.
func (s *runtimeStore) Delete(name string) error {
	if s.dir == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.modules)
	s.modules = slices.DeleteFunc(s.modules, func(m savedModule) bool { return m.Name == name })
	if len(s.modules) == n {
		return nil
	}
	return s.saveLocked()
}

func (s *runtimeStore) saveLocked() error {
	if err := os.MkdirAll(s.dir, 0o750); err != nil {
		return fmt.Errorf("save runtime modules: %w", err)
	}
	doc := stateDoc{Version: 1, Modules: s.modules}
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
	if d, err := os.Open(s.dir); err == nil {
		d.Sync() // best effort: make the rename durable
		d.Close()
	}
	return nil
}
