package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// pySketch drives bench/python/sketch.py in serve mode: one JSON request per line on its
// stdin, one JSON answer per line on its stdout.
type pySketch struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	Version string
}

func startPython(python, script string) (*pySketch, error) {
	if _, err := exec.LookPath(python); err != nil {
		return nil, fmt.Errorf("%s not found: %w", python, err)
	}
	if _, err := os.Stat(script); err != nil {
		return nil, err
	}
	cmd := exec.Command(python, script, "serve")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &pySketch{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	var v struct {
		Python string `json:"python"`
	}
	if err := p.call(map[string]any{"cmd": "version"}, &v); err != nil {
		p.Close()
		return nil, err
	}
	p.Version = v.Python
	return p, nil
}

// call sends req and decodes the answer into out.
func (p *pySketch) call(req any, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("python sketch: %w", err)
	}
	if strings.HasPrefix(line, `{"error"`) {
		return fmt.Errorf("python sketch: %s", strings.TrimSpace(line))
	}
	return json.Unmarshal([]byte(line), out)
}

func (p *pySketch) Close() {
	if p == nil {
		return
	}
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
