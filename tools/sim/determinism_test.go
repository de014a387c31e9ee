package sim_test

import (
	"bytes"
	"os/exec"
	"testing"
)

// The same configuration, scenario and seed give byte-identical summaries and reports; a
// different seed gives different bytes.
func TestDeterminism(t *testing.T) {
	const ticks = 1500
	a, ra := runDemo(t, ticks, 7, nil)
	b, rb := runDemo(t, ticks, 7, nil)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs with seed 7 differ: first difference at byte %d", firstDiff(a, b))
	}
	var ta, tb bytes.Buffer
	ra.WriteJSON(&ta)
	rb.WriteJSON(&tb)
	if !bytes.Equal(ta.Bytes(), tb.Bytes()) {
		t.Fatal("two reports with seed 7 differ")
	}
	c, _ := runDemo(t, ticks, 8, nil)
	if bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave identical summaries")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A goroutine of the process that sits in a system call (here one waiting for a child
// process) does not stall a simulation: only the simulation's goroutines are waited for.
func TestOtherGoroutineInSyscall(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }() // blocks in wait4 until the child is killed
	defer func() {
		cmd.Process.Kill()
		<-waited
	}()
	if _, rep := runDemo(t, 200, 1, nil); rep.Ticks != 200 {
		t.Fatalf("ran %d ticks; want 200", rep.Ticks)
	}
}
